"""The key index of journal files: built once, caught up, rebuilt when the
file changed behind it; a drop writes the file anew. And on every
persistent journal, drops beside another process's appends."""

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from sessionstore import FileJournal, JsonlStore, open_store
from sessionstore.store import SessionJournal
from tests.helpers import WORKERS, ForkServer
from tests.kinds import PERSISTENT_JOURNAL_KINDS, StoreTargets


def keyed(key: str, value: str = "v") -> bytes:
    return f'{{"key":"{key}","value":"{value}"}}'.encode()


class Reads:
    """Counts the bytes read with ``os.pread`` (what the index reads)."""

    def __init__(self) -> None:
        self.bytes = 0
        self._pread = os.pread

    def __call__(self, fd: int, length: int, offset: int) -> bytes:
        data = self._pread(fd, length, offset)
        self.bytes += len(data)
        return data


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    counted = Reads()
    monkeypatch.setattr(os, "pread", counted)
    return counted


async def test_a_second_look_reads_only_what_was_appended_since(
    tmp_path: Path, reads: Reads
) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append_raw(*(keyed(f"k{n:04}", "x" * 100) for n in range(1000)))
    size = journal.path.stat().st_size
    assert await journal.keyed("k0500") == {"k0500": [keyed("k0500", "x" * 100)]}
    assert reads.bytes >= size  # built once, from the whole file
    reads.bytes = 0
    await journal.append_raw(keyed("new"))
    assert await journal.keyed("new", "k0001") == {
        "new": [keyed("new")],
        "k0001": [keyed("k0001", "x" * 100)],
    }
    assert [key for key, _ in await journal.scan("k", limit=2)] == ["k0999", "k0998"]
    assert reads.bytes < size // 20  # the new line, what recognises the file, what is returned


async def test_a_stores_journal_objects_share_one_index(tmp_path: Path, reads: Reads) -> None:
    store = JsonlStore(tmp_path / "store")
    await store.journal("agent").append_raw(*(keyed(f"k{n}", "x" * 100) for n in range(1000)))
    assert len(await store.journal("agent").keyed("k1")) == 1
    size = store.journal("agent").path.stat().st_size
    reads.bytes = 0
    assert len(await store.journal("agent").keyed("k2")) == 1  # another object, the same index
    assert reads.bytes < size // 20
    store.drop_caches()
    assert len(await store.journal("agent").keyed("k3")) == 1
    assert reads.bytes > size  # forgotten: read again


async def test_drop_caches_empties_the_index_of_a_journal_object_already_made(
    tmp_path: Path, reads: Reads
) -> None:
    store = JsonlStore(tmp_path / "store")
    journal = store.journal("agent")
    await journal.append_raw(*(keyed(f"k{n}", "x" * 100) for n in range(1000)))
    assert len(await journal.keyed("k1")) == 1
    size = journal.path.stat().st_size
    store.drop_caches()
    reads.bytes = 0
    assert len(await journal.keyed("k2")) == 1
    assert reads.bytes > size  # the same object's index was emptied: read again


async def test_a_file_cut_back_behind_the_index_is_read_again(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append_raw(keyed("a"), keyed("b"))
    assert len(await journal.keyed("a", "b")) == 2
    with journal.path.open("r+b") as file:  # another process cut it, and wrote more
        file.truncate(len(keyed("a")) + 1)
        file.seek(0, os.SEEK_END)
        file.write(keyed("c") + b"\n")
    assert await journal.keyed("a", "b", "c") == {"a": [keyed("a")], "c": [keyed("c")]}


async def test_a_file_rewritten_in_place_behind_the_index_is_read_again(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append_raw(keyed("a", "1"), keyed("b", "1"))
    assert len(await journal.keyed("a", "b")) == 2
    inode = journal.path.stat().st_ino
    with journal.path.open("r+b") as file:  # the same file, the same length, other lines
        file.write(keyed("c", "1") + b"\n" + keyed("d", "1") + b"\n" + keyed("e"))
    assert journal.path.stat().st_ino == inode
    assert await journal.keyed("a", "b", "c", "d", "e") == {
        "c": [keyed("c", "1")],
        "d": [keyed("d", "1")],
        "e": [keyed("e")],  # a last line without its newline is a line
    }


async def test_a_file_replaced_behind_the_index_is_read_again(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append_raw(keyed("a"))
    assert len(await journal.keyed("a")) == 1
    other = tmp_path / "other"
    other.write_bytes(keyed("a") + b"\n" + keyed("b") + b"\n")
    os.replace(other, journal.path)
    assert await journal.keyed("a", "b") == {"a": [keyed("a")], "b": [keyed("b")]}


async def test_a_drop_writes_the_file_anew_whole(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    journal = store.journal("agent")
    await journal.append_raw(keyed("a"), b"not json", keyed("b"), b"torn")
    inode = journal.path.stat().st_ino
    record = await journal.drop("a", reason="pruned")
    assert record is not None
    assert journal.path.read_bytes() == b"not json\n" + keyed("b") + b"\ntorn\n"
    assert journal.path.stat().st_ino != inode  # renamed over it
    assert sorted(os.listdir(journal.path.parent)) == ["session_journal.jsonl"]
    assert await store.erasures() == [record]
    assert await store.integrity() == []
    assert await store.journals() == ["agent"]


async def test_a_drop_removes_what_a_drop_that_died_left(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append_raw(keyed("a"), keyed("b"))
    stale = tmp_path / ".session_journal.jsonl.drop-0123"
    stale.write_bytes(keyed("b") + b"\n")  # killed before its rename
    assert await journal.drop("a", reason="pruned") is not None
    assert sorted(os.listdir(tmp_path)) == ["session_journal.jsonl"]


async def test_a_journal_of_its_own_returns_its_drop_record(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append_raw(keyed("a"), keyed("b"))
    record = await journal.drop("a", reason="pruned")
    assert record is not None
    assert (record.name, record.lines, record.keys) == (tmp_path.name, 1, 1)
    assert journal.path.read_bytes() == keyed("b") + b"\n"


@pytest.mark.parametrize("kind", PERSISTENT_JOURNAL_KINDS)
async def test_drops_lose_no_line_another_process_appends_meanwhile(
    kind: str, store_targets: StoreTargets
) -> None:
    count = 200
    if kind == "file":
        where = str(store_targets.directory("agent"))
        journal: SessionJournal = FileJournal.in_dir(where)
        store = None
    else:
        where = store_targets.new(kind)
        store = await open_store(where)
        journal = store.journal("agent")
    try:
        async with ForkServer(WORKERS / "journal_appender.py") as server:
            worker = await server.run("file" if kind == "file" else "store", where, str(count))
            assert await worker.readline() == b"0\n"  # its session begun
            rest = asyncio.ensure_future(worker.read())
            dropped = 0
            while not rest.done() or dropped < 5:
                await journal.append_raw(keyed(f"k{dropped}"), keyed("kept"))
                assert await journal.drop(f"k{dropped}", reason="pruned") is not None
                dropped += 1
            assert len((await rest).split()) == count - 1
        read = await journal.read()
        assert [write.id for write in read.sessions[-1].writes] == [
            uuid.UUID(int=n) for n in range(count)
        ]
        assert [(key, len(lines)) for key, lines in await journal.scan("")] == [("kept", dropped)]
    finally:
        if store is not None:
            await store.close()
