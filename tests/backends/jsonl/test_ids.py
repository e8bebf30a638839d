"""The index of a JSONL session's message ids: a new compaction's search
reads it instead of the history's bytes, and is never misled by it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import CompactionEntry, JsonlStore, Message, MessageEntry, SessionMeta, encode
from sessionstore.backends.jsonl import hints as jsonl_hints
from sessionstore.backends.jsonl import ids as jsonl_ids
from sessionstore.backends.jsonl import store as jsonl_store
from sessionstore.backends.jsonl.context import first_kept_in
from sessionstore.backends.records import header_line
from sessionstore.context import build_context
from sessionstore.models import SessionEntry


def message(entry_id: str, text: str = "words") -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp="t", message=Message.user(text))


def compaction(entry_id: str, kept: str) -> CompactionEntry:
    return CompactionEntry(id=entry_id, timestamp="t", summary="s", first_kept_id=kept)


@pytest.fixture
def byte_searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Where each search of the history's bytes began; the index (and a
    hint) used for any history, however short."""
    monkeypatch.setattr(jsonl_hints, "HINT_FROM", 0)
    starts: list[int] = []
    search = first_kept_in

    def counted(fd: int, kept: str, end: int, start: int = 0) -> int | None:
        starts.append(start)
        return search(fd, kept, end, start)

    monkeypatch.setattr(jsonl_ids, "first_kept_in", counted)
    return starts


async def assert_exact(directory: Path, session_id: str) -> None:
    """The context a new store object (a new process) reads is the one
    built from the whole log."""
    expected = build_context(await JsonlStore(directory).load(session_id))
    assert await JsonlStore(directory).load_context(session_id) == expected


async def long_session(directory: Path) -> str:
    store = JsonlStore(directory)
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message(f"old{n}") for n in range(200)])
    await store.append_many("s", [message("k", "kept"), message("t", "tail")])
    await store.append("s", compaction("c", "k"))
    return "s"


async def test_a_new_compaction_is_placed_from_the_index(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    await long_session(tmp_path)
    await assert_exact(tmp_path, "s")
    assert byte_searches == []
    index = tmp_path / jsonl_ids.IDS / "s"
    assert index.stat().st_mode & 0o777 == 0o600  # private, as the sessions


async def test_an_earlier_message_with_the_kept_id_is_found_in_the_index(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message("a"), message("k", "first k"), message("b")])
    await store.append_many("s", [message(f"m{n}") for n in range(50)])
    await store.append_many("s", [message("k", "second k"), compaction("c", "k")])
    texts = [m.text() for m in await JsonlStore(tmp_path).load_context("s")]
    assert texts[1:3] == ["first k", "words"]  # from the first message with the id
    await assert_exact(tmp_path, "s")
    assert byte_searches == []


async def test_lines_another_program_appended_are_searched_as_bytes(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    await long_session(tmp_path)
    path = JsonlStore(tmp_path).path("s")
    covered = path.stat().st_size
    written: list[SessionEntry] = [
        message("x", "theirs"),
        message("y"),
        message("x", "again"),
        compaction("c2", "x"),
    ]
    with path.open("ab") as file:  # the Rust implementation, say
        file.write(b"".join(encode(e).encode() + b"\n" for e in written))
    texts = [m.text() for m in await JsonlStore(tmp_path).load_context("s")]
    assert texts[1:] == ["theirs", "words", "again"]
    await assert_exact(tmp_path, "s")
    assert byte_searches == [covered]  # only what the index has not seen


async def test_an_append_catches_the_index_up_with_a_few_lines_it_missed(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    await long_session(tmp_path)
    store = JsonlStore(tmp_path)
    with store.path("s").open("ab") as file:
        file.write(encode(message("x", "theirs")).encode() + b"\n")
    await store.append_many("s", [message("y"), compaction("c2", "x")])
    await assert_exact(tmp_path, "s")
    assert byte_searches == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-5],  # torn
        lambda data: b"garbage" * 10,
        lambda data: bytes(len(data)),  # zeroed
        lambda data: data[:100] + bytes(16) + data[116:],  # old messages' records
    ],
    ids=["torn", "garbage", "zeroed", "other records zeroed"],
)
async def test_a_damaged_index_never_misleads(
    tmp_path: Path, byte_searches: list[int], damage: Callable[[bytes], bytes]
) -> None:
    await long_session(tmp_path)
    index = tmp_path / jsonl_ids.IDS / "s"
    index.write_bytes(damage(index.read_bytes()))
    await assert_exact(tmp_path, "s")


async def test_a_file_rewritten_behind_the_index_is_searched_as_bytes(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    await long_session(tmp_path)
    path = JsonlStore(tmp_path).path("s")
    lines = path.read_bytes().split(b"\n")
    # The same length, an earlier message now holding the kept id: only
    # a check of the bytes the index saw can tell.
    lines[5] = lines[5].replace(b'"id":"old4"', b'"id":"k"   ')
    replaced = tmp_path / "other"
    replaced.write_bytes(b"\n".join(lines))
    os.replace(replaced, path)  # a new inode
    await assert_exact(tmp_path, "s")
    assert byte_searches == [0]


async def test_a_long_file_without_an_index_gets_none_and_is_searched(
    tmp_path: Path, byte_searches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_ids, "CATCH_UP", 1000)
    store = JsonlStore(tmp_path)
    lines = [header_line(SessionMeta(id="s"))]  # written before the index existed
    lines += [encode(message(f"old{n}")) for n in range(50)]
    (tmp_path / "s.jsonl").write_text("".join(line + "\n" for line in lines))
    await store.append_many("s", [message("k"), compaction("c", "k")])
    assert not (tmp_path / jsonl_ids.IDS / "s").exists()
    await assert_exact(tmp_path, "s")
    assert byte_searches == [0]


async def test_a_lost_column_of_first_bytes_is_caught_up(
    tmp_path: Path, byte_searches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    await long_session(tmp_path)
    column = tmp_path / jsonl_ids.IDS / jsonl_ids.FIRSTS / "s"
    whole = column.read_bytes()
    scans: list[int] = []
    rows = jsonl_ids._rows

    def scanned(index: int, count: int, wanted: bytes) -> list[int]:
        scans.append(1)
        return rows(index, count, wanted)

    monkeypatch.setattr(jsonl_ids, "_rows", scanned)
    column.write_bytes(whole[:-8])  # behind the records: they are read instead
    await assert_exact(tmp_path, "s")
    assert (byte_searches, scans) == ([], [1])
    column.unlink()
    store = JsonlStore(tmp_path)
    await store.append_many("s", [message("k", "again"), compaction("c2", "k")])
    assert column.read_bytes().startswith(whole)  # rebuilt from the records
    await assert_exact(tmp_path, "s")
    assert (byte_searches, scans) == ([], [1])


async def lines_of(entries: list[SessionEntry]) -> AsyncIterator[str]:
    for entry in entries:
        yield encode(entry)


async def test_an_imported_session_comes_with_its_index(
    tmp_path: Path, byte_searches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_ids, "CATCH_UP", 0)  # no catching up: the import writes it
    monkeypatch.setattr(jsonl_store, "READ", 512)  # many writes of lines
    store = JsonlStore(tmp_path)
    header = header_line(SessionMeta(id="s"))
    first: list[SessionEntry] = [message("k", "first k"), *(message(f"m{n}") for n in range(40))]
    await store.import_session(header, lines_of(first))
    more: list[SessionEntry] = [message("k", "second k"), compaction("c", "k")]
    await store.import_session(header, lines_of(more), after=len(first))
    texts = [m.text() for m in await JsonlStore(tmp_path).load_context("s")]
    assert texts[1:3] == ["first k", "words"]
    await assert_exact(tmp_path, "s")
    assert byte_searches == []
    await store.append_many("s", [message("x"), compaction("c2", "m3")])  # and it goes on
    await assert_exact(tmp_path, "s")
    assert byte_searches == []


async def test_a_store_writing_no_caches_writes_no_index(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    store = JsonlStore(tmp_path, write_caches=False)
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message("k", "first k"), message("m")])
    header = header_line(SessionMeta(id="t"))
    await store.import_session(header, lines_of([message("k", "first k"), message("m")]))
    await store.import_session(header, lines_of([compaction("c", "k")]), after=2)
    await store.append("s", compaction("c", "k"))
    assert not (tmp_path / jsonl_ids.IDS).exists()
    for session_id in ("s", "t"):  # searched as bytes, exact
        texts = [m.text() for m in await store.load_context(session_id)]
        assert texts[1:] == ["first k", "words"]  # after the summary
    assert byte_searches


async def test_an_index_left_behind_by_appends_writing_none_still_holds(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    await long_session(tmp_path)
    index = tmp_path / jsonl_ids.IDS / "s"
    before, covered = index.read_bytes(), (tmp_path / "s.jsonl").stat().st_size
    store = JsonlStore(tmp_path, write_caches=False)
    await store.append_many("s", [message("x"), message("late"), compaction("c2", "late")])
    assert index.read_bytes() == before  # covers the lines before these only
    await assert_exact(tmp_path, "s")
    assert byte_searches == [covered]  # only the lines past the index, as bytes


async def test_erasing_removes_the_index(tmp_path: Path) -> None:
    await long_session(tmp_path)
    store = JsonlStore(tmp_path)
    assert (tmp_path / jsonl_ids.IDS / "s").exists()
    await store.erase("s", reason="asked")
    assert not (tmp_path / jsonl_ids.IDS / "s").exists()
    assert not (tmp_path / jsonl_ids.IDS / jsonl_ids.FIRSTS / "s").exists()


async def test_an_index_that_cannot_be_written_changes_nothing(
    tmp_path: Path, byte_searches: list[int]
) -> None:
    (tmp_path / jsonl_ids.IDS).mkdir()
    (tmp_path / jsonl_ids.IDS / "s").mkdir()  # a directory where the index goes
    await long_session(tmp_path)
    await assert_exact(tmp_path, "s")
    assert byte_searches == [0]


_ids = st.sampled_from(["a", "b", "k", "x/y", "é"])
_entries = st.lists(
    st.one_of(
        _ids.map(message),
        st.tuples(st.sampled_from(["c1", "c2"]), _ids).map(lambda t: compaction(*t)),
    ),
    max_size=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(_entries, min_size=1, max_size=5), foreign=st.integers(0, 4))
async def test_contexts_with_the_index_are_exact(
    tmp_path_factory: pytest.TempPathFactory,
    byte_searches: list[int],
    batches: list[list[SessionEntry]],
    foreign: int,
) -> None:
    directory = tmp_path_factory.mktemp("ids")
    store = JsonlStore(directory)
    await store.create(SessionMeta(id="s"))
    for number, batch in enumerate(batches):
        if number == foreign:  # lines of another program between the store's
            with store.path("s").open("ab") as file:
                file.write(b"".join(encode(e).encode() + b"\n" for e in batch))
        else:
            await store.append_many("s", batch)
        await assert_exact(directory, "s")
