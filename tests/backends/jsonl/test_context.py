"""The JSONL store's load_context, read from the end of the file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import (
    CompactionEntry,
    JsonlStore,
    Message,
    MessageEntry,
    SessionEntry,
    SessionMeta,
    encode,
)
from sessionstore.backends.jsonl import context as jsonl_context
from sessionstore.backends.jsonl import hints as jsonl_hints
from sessionstore.context import build_context
from sessionstore.errors import CorruptSessionError

IDS = ["a", "b", "c", "d/e", "é"]


def message(entry_id: str, text: str) -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp="t", message=Message.user(text))


def compaction(entry_id: str, summary: str, kept: str) -> CompactionEntry:
    return CompactionEntry(id=entry_id, timestamp="t", summary=summary, first_kept_id=kept)


def spelled(entry: SessionEntry, escape: bool, crlf: bool) -> str:
    """The entry's line, its id spelled with escapes when asked (as imports keep)."""
    line = encode(entry)
    if escape:
        plain = f'"id":"{entry.id}"'
        if "/" in entry.id:  # the one other escape of a plain character
            escaped = '"id":"' + entry.id.replace("/", "\\/") + '"'
        else:
            escaped = '"id":"' + "".join(f"\\u{ord(c):04x}" for c in entry.id) + '"'
        line = line.replace(plain, escaped, 1)
    return line + ("\r" if crlf else "")


async def lines(items: list[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


entries = st.one_of(
    st.builds(message, st.sampled_from(IDS), st.text(max_size=30)),
    st.builds(compaction, st.just("c"), st.text(max_size=10), st.sampled_from([*IDS, "none"])),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    log=st.lists(st.tuples(entries, st.booleans(), st.booleans()), max_size=25),
    chunk=st.sampled_from([1, 7, 64, 1 << 16]),
)
async def test_equals_build_context_of_load(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    log: list[tuple[SessionEntry, bool, bool]],
    chunk: int,
) -> None:
    # Duplicate ids, ids spelled with escapes, CRLF lines and reads cut
    # anywhere: the tail read must give what the whole log gives, and so
    # must a new store object reading the answer from the hint left.
    monkeypatch.setattr(jsonl_context, "CHUNK", chunk)
    monkeypatch.setattr(jsonl_hints, "HINT_FROM", 0)
    store = JsonlStore(tmp_path / f"store-{chunk}")
    meta = SessionMeta.new()
    await store.import_session(encode(meta), lines([spelled(*item) for item in log]))
    expected = build_context([entry for entry, _, _ in log])
    assert await store.load_context(meta.id) == expected
    assert await store.load_context(meta.id) == expected  # with the answer remembered
    assert await JsonlStore(store.directory).load_context(meta.id) == expected


async def test_the_history_before_the_kept_message_is_not_decoded(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(meta.id, [message(f"old{n}", "old") for n in range(50)])
    await store.append_many(
        meta.id, [message("kept", "kept"), message("tail", "tail"), compaction("c", "s", "kept")]
    )
    path = store.path(meta.id)
    data = path.read_bytes().split(b"\n")
    # Lines 2..51 become garbage of the same length: a loader must fail on them.
    data[1:51] = [b"x" * len(line) for line in data[1:51]]
    path.write_bytes(b"\n".join(data))
    context = await store.load_context(meta.id)
    assert [m.text() for m in context] == ["[Conversation summary]\ns", "kept", "tail"]
    with pytest.raises(CorruptSessionError):
        await store.load(meta.id)


async def test_a_bad_line_in_the_tail_is_named_by_its_number(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(meta.id, [message(f"e{n}", "x") for n in range(10)])
    path = store.path(meta.id)
    data = path.read_bytes().split(b"\n")
    data[8] = b"{" + b" " * (len(data[8]) - 1)  # line 9, entry e7
    path.write_bytes(b"\n".join(data))
    with pytest.raises(CorruptSessionError) as caught:
        await store.load_context(meta.id)
    assert (caught.value.path, caught.value.line) == (str(path), 9)


async def test_a_header_naming_another_session_is_refused(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    meta, other = SessionMeta.new(), SessionMeta.new()
    await store.create(meta)
    await store.append(meta.id, message("e1", "x"))
    path = store.path(meta.id)
    rest = path.read_bytes().split(b"\n", 1)[1]
    path.write_bytes(encode(other).encode() + b"\n" + rest)
    with pytest.raises(CorruptSessionError, match="header names session"):
        await store.load_context(meta.id)


async def test_the_earlier_search_runs_once_per_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(
        meta.id, [message("a", "first"), message("k", "kept"), compaction("c", "s", "k")]
    )
    searched: list[int] = []
    search = jsonl_context.first_kept_in

    def counted(fd: int, kept: str, end: int) -> int | None:
        searched.append(end)
        return search(fd, kept, end)

    monkeypatch.setattr(jsonl_hints, "first_kept_in", counted)
    for turn in range(3):
        await store.append(meta.id, message(f"t{turn}", "turn"))
        context = await store.load_context(meta.id)
        assert [m.text() for m in context][1:] == ["kept", *(["turn"] * (turn + 1))]
    assert len(searched) == 1
