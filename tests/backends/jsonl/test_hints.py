"""Hints: where a long JSONL session's context starts, kept beside the files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sessionstore import CompactionEntry, JsonlStore, Message, MessageEntry, SessionMeta, encode
from sessionstore.backends.jsonl import context as jsonl_context
from sessionstore.backends.jsonl import hints as jsonl_hints
from sessionstore.context import build_context

SUMMARY = "[Conversation summary]\n"


def message(entry_id: str, text: str) -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp="t", message=Message.user(text))


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every search of the history's bytes, by where it stopped; a hint for
    any search, however short."""
    monkeypatch.setattr(jsonl_hints, "HINT_FROM", 0)
    searched: list[int] = []
    search = jsonl_context.first_kept_in

    def counted(fd: int, kept: str, end: int) -> int | None:
        searched.append(end)
        return search(fd, kept, end)

    monkeypatch.setattr(jsonl_hints, "first_kept_in", counted)
    return searched


async def session(directory: Path) -> str:
    """Old messages, one kept message named k, a compaction keeping k."""
    store = JsonlStore(directory)
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(meta.id, [message(f"old{n}", f"old {n}") for n in range(100)])
    await store.append_many(
        meta.id,
        [
            message("k", "kept"),
            message("t", "tail"),
            CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="k"),
        ],
    )
    return meta.id


async def context_texts(directory: Path, session_id: str) -> list[str]:
    """The context's texts, read by a store object of its own (a new process)."""
    return [m.text() for m in await JsonlStore(directory).load_context(session_id)]


async def assert_exact(directory: Path, session_id: str) -> None:
    store = JsonlStore(directory)
    expected = build_context(await store.load(session_id))
    assert await JsonlStore(directory).load_context(session_id) == expected


async def test_a_new_store_reads_the_hint_instead_of_searching(
    tmp_path: Path, searches: list[int]
) -> None:
    session_id = await session(tmp_path)
    assert await context_texts(tmp_path, session_id) == [SUMMARY + "s", "kept", "tail"]
    assert len(searches) == 1
    hint = tmp_path / ".kept" / session_id
    assert stat.S_IMODE(hint.stat().st_mode) == 0o600  # private, as the sessions
    assert await context_texts(tmp_path, session_id) == [SUMMARY + "s", "kept", "tail"]
    assert len(searches) == 1
    assert [meta.id for meta in await JsonlStore(tmp_path).list()] == [session_id]


async def test_a_short_history_leaves_no_hint(tmp_path: Path) -> None:
    session_id = await session(tmp_path)
    await context_texts(tmp_path, session_id)
    assert not (tmp_path / ".kept").exists()


async def test_a_hint_follows_appends_but_not_a_new_compaction(
    tmp_path: Path, searches: list[int]
) -> None:
    session_id = await session(tmp_path)
    await context_texts(tmp_path, session_id)
    await JsonlStore(tmp_path).append(session_id, message("t2", "more"))
    assert (await context_texts(tmp_path, session_id))[-1] == "more"
    assert len(searches) == 1  # the bytes before the kept message did not change
    await JsonlStore(tmp_path).append(
        session_id, CompactionEntry(id="c2", timestamp="t", summary="s2", first_kept_id="t")
    )
    assert await context_texts(tmp_path, session_id) == [SUMMARY + "s2", "tail", "more"]
    assert len(searches) == 2


async def test_a_replaced_file_is_searched_again(tmp_path: Path, searches: list[int]) -> None:
    session_id = await session(tmp_path)
    await context_texts(tmp_path, session_id)
    # The same lines, but the first old message now has the kept id: the
    # context starts there. The file is replaced whole, as an import does.
    path = JsonlStore(tmp_path).path(session_id)
    lines = path.read_bytes().split(b"\n")
    lines[1] = encode(message("k", "first k")).encode()
    replacement = tmp_path / "replacement"
    replacement.write_bytes(b"\n".join(lines))
    os.replace(replacement, path)
    assert (await context_texts(tmp_path, session_id))[1] == "first k"
    assert len(searches) == 2
    await assert_exact(tmp_path, session_id)


async def test_a_hint_for_other_bytes_is_not_used(tmp_path: Path, searches: list[int]) -> None:
    session_id = await session(tmp_path)
    await context_texts(tmp_path, session_id)
    # Rewritten in place, same inode and size: the message just before the
    # kept one takes its id. The hint's digest covers those bytes.
    path = JsonlStore(tmp_path).path(session_id)
    data = path.read_bytes()
    old, new = encode(message("old99", "old 99")), encode(message("k", "kept early"))
    assert len(old) == len(new)
    with path.open("r+b") as file:
        file.write(data.replace(old.encode(), new.encode()))
    assert (await context_texts(tmp_path, session_id))[1] == "kept early"
    assert len(searches) == 2
    await assert_exact(tmp_path, session_id)


@pytest.mark.parametrize(
    "damage",
    [b"", b"x" * 58, b"sessionstore kept hint 1\n" + b"\0" * 40],
    ids=["torn", "garbage", "zeroed"],
)
async def test_a_torn_or_foreign_hint_is_ignored_and_rewritten(
    tmp_path: Path, searches: list[int], damage: bytes
) -> None:
    session_id = await session(tmp_path)
    await context_texts(tmp_path, session_id)
    hint = tmp_path / ".kept" / session_id
    whole = hint.read_bytes()
    hint.write_bytes(damage or whole[: len(whole) // 2])
    assert (await context_texts(tmp_path, session_id))[1] == "kept"
    assert len(searches) == 2
    assert hint.read_bytes() == whole
    await context_texts(tmp_path, session_id)
    assert len(searches) == 2


async def test_a_hint_that_cannot_be_written_changes_nothing(
    tmp_path: Path, searches: list[int]
) -> None:
    session_id = await session(tmp_path)
    (tmp_path / ".kept").write_bytes(b"")  # a file where the hints' directory would be
    assert (await context_texts(tmp_path, session_id))[1] == "kept"
    assert (await context_texts(tmp_path, session_id))[1] == "kept"
    assert len(searches) == 2
    assert [meta.id for meta in await JsonlStore(tmp_path).list()] == [session_id]
