"""Erasing from a JsonlStore beyond the contract: bytes gone, crashes, processes."""

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import (
    FileJournal,
    JsonlStore,
    SessionMeta,
    SessionNotFoundError,
    StorageError,
)
from sessionstore.backends.jsonl import erasures as erasure_log
from sessionstore.testing.contract import message
from tests.backends.jsonl.helpers import erase_dying_before_the_unlink
from tests.helpers import spawn_appender

MARKER = "marker-5f0c1e7a-do-not-keep"


def files_holding(directory: Path, marker: bytes) -> list[Path]:
    """Every file under ``directory`` (hidden ones too) whose bytes hold ``marker``."""
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            if marker in path.read_bytes():
                found.append(path)
    return found


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "store")


async def test_no_byte_of_an_erased_session_or_journal_stays_under_the_directory(
    store: JsonlStore,
) -> None:
    # A long session, so its context hint is written beside it, and a batch.
    await store.create(SessionMeta(id="s"))
    padding = "p" * 4000
    await store.append_many("s", [message(f"e{n}", padding) for n in range(300)])
    await store.append_many("s", [message("secret", MARKER), message("after", "x")])
    await store.compact("s", "sum", keep_last=2)  # kept from the marker's message
    await store.load_context("s")
    assert (store.directory / ".kept" / "s").exists()
    await store.set_title("s", f"about {MARKER}")  # titles, and a listing showing one
    assert [summary.title for summary in await store.summaries()] == [f"about {MARKER}"]
    journal = store.journal("agent")
    await journal.append_raw(MARKER.encode())
    before = files_holding(store.directory, MARKER.encode())
    assert store.path("s") in before
    assert journal.path in before
    await store.erase("s", reason="the user asked")
    await journal.erase(reason="the user asked")
    assert files_holding(store.directory, MARKER.encode()) == []
    assert not journal.path.parent.exists()  # the journal's own directory went too
    assert [record.kind for record in await store.erasures()] == ["session", "journal"]


async def test_the_record_is_in_the_log_and_holds_no_content(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e1", MARKER))
    record = await store.erase("s", reason="r")
    log = store.directory / erasure_log.ERASURES / "log.jsonl"
    assert MARKER.encode() not in log.read_bytes()
    assert log.read_bytes().count(b"\n") == 1
    assert await JsonlStore(store.directory).erasures() == [record]


async def test_a_torn_last_record_is_dropped(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    record = await store.erase("s", reason="r")
    log = store.directory / erasure_log.ERASURES / "log.jsonl"
    with log.open("ab") as file:  # what a crash in the middle of a write leaves
        file.write(b'{"kind":"sess')
    assert await store.erasures() == [record]
    await store.create(SessionMeta(id="t"))
    second = await store.erase("t", reason="r")  # never fused onto the torn bytes
    assert await store.erasures() == [record, second]


async def test_an_erase_that_died_before_the_unlink_is_finished_by_erasing_again(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e1", "a"))
    path = store.path("s")
    await erase_dying_before_the_unlink(store, monkeypatch, reason="first try")
    # The record and the file are both there; integrity says what to do.
    [record] = await store.erasures()
    assert path.exists()
    [fault] = await store.integrity()
    assert "did not finish" in fault
    assert "'s'" in fault
    assert await store.erase("s", reason="second try") == record  # one record
    assert await store.erasures() == [record]
    assert not path.exists()
    assert await store.integrity() == []


async def test_bytes_appended_after_a_died_erase_are_recorded_anew(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create(SessionMeta(id="s"))
    await erase_dying_before_the_unlink(store, monkeypatch, reason="r")
    await store.append("s", message("late", "x"))
    second = await store.erase("s", reason="r")
    first = (await store.erasures())[0]
    assert (first.lines, second.lines) == (0, 1)
    assert await store.erasures() == [first, second]


async def test_an_erased_id_imported_back_is_erased_and_recorded_again(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e1", "a"))
    lines = [line async for line in store.raw_lines("s")]
    first = await store.erase("s", reason="r")
    await store.import_session(lines[0], _lines(lines[1:]))  # the same bytes again
    second = await store.erase("s", reason="r")
    assert first.digest == second.digest
    assert await store.erasures() == [first, second]


async def _lines(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_a_journal_on_its_own_is_removed_and_its_record_returned(
    tmp_path: Path,
) -> None:
    journal = FileJournal.in_dir(tmp_path / "agent")
    await journal.append_raw(b"one", b"two")
    record = await journal.erase(reason="r")
    assert record is not None
    assert (record.kind, record.name, record.lines) == ("journal", "agent", 2)
    assert record.digest == hashlib.blake2b(b"one\ntwo\n", digest_size=32).hexdigest()
    assert not journal.path.exists()
    assert (tmp_path / "agent").is_dir()  # the agent's directory is the agent's
    assert sorted(os.listdir(tmp_path)) == ["agent"]  # nothing kept anywhere


async def test_a_journal_with_a_torn_last_line_counts_it(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    journal.path.write_bytes(b"one\ntw")
    record = await journal.erase(reason="r")
    assert record is not None
    assert record.lines == 2
    assert record.digest == hashlib.blake2b(b"one\ntw", digest_size=32).hexdigest()


async def test_a_session_erased_while_a_process_appends_stays_gone(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="s"))
    target = str(store.directory)
    appender = await spawn_appender(target, "s", "w", 100_000, 2000)
    assert appender.stdout is not None
    for _ in range(20):  # let it get going
        await appender.stdout.readline()
    record = await store.erase("s", reason="r")
    stdout, _ = await asyncio.wait_for(appender.communicate(), timeout=60)
    assert appender.returncode != 0  # its next append found no session
    returned = 20 + len(stdout.split())
    assert record.lines == returned  # every append that returned went with it
    assert not store.path("s").exists()  # a late append recreated nothing
    with pytest.raises(SessionNotFoundError):
        await store.load("s")
    batches = store.directory / ".batch"
    assert not batches.exists() or os.listdir(batches) == []  # no batch half-written
    assert await store.integrity() == []


async def test_a_journal_append_waiting_on_an_erase_starts_the_journal_again(
    store: JsonlStore,
) -> None:
    journal = store.journal("agent")
    await journal.append_raw(b"old")
    appends = [asyncio.create_task(journal.append_raw(f"n{n}".encode())) for n in range(20)]
    record = await journal.erase(reason="r")
    await asyncio.gather(*appends)
    assert record is not None
    kept = (await journal.read_bytes()).split()
    assert b"old" not in kept
    assert record.lines + len(kept) == 21  # each line erased or kept, none lost


async def test_another_store_objects_cached_context_never_serves_erased_text(
    tmp_path: Path,
) -> None:
    # An id erased and created again often gets the erased file's inode back.
    for _ in range(10):
        directory = tmp_path / f"store-{_}"
        async with JsonlStore(directory) as agent, JsonlStore(directory) as admin:
            await admin.create(SessionMeta(id="chat"))
            await admin.append("chat", message("e1", "my card is 4111"))
            await agent.load_context("chat")
            await admin.erase("chat", reason="asked")
            await admin.create(SessionMeta(id="chat"))
            await admin.append_many("chat", [message("n1", "hello there 123"), message("n2", "b")])
            assert [m.text() for m in await agent.load_context("chat")] == ["hello there 123", "b"]


async def test_an_erase_of_a_journal_that_died_before_the_unlink_is_reported_and_finished(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = store.journal("agent")
    await journal.append_raw(b"one")
    path = store.directory / "journals" / "agent" / "session_journal.jsonl"
    assert path.is_file()
    unlink = os.unlink

    def crash(name: str, *, dir_fd: int | None = None) -> None:
        if name == path.name:  # the journal's file, unlinked in its directory
            raise OSError(5, "simulated crash", str(path))
        unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", crash)
    with pytest.raises(StorageError):
        await journal.erase(reason="first try")
    monkeypatch.undo()
    [record] = await store.erasures()
    note = store.directory / ".erasing" / "journal" / "agent"
    assert await store.integrity() == [
        f"{note}: the erase of journal 'agent' did not finish:"
        " erase it again to finish (its record is kept once)"
    ]
    assert await journal.erase(reason="second try") == record
    assert not path.exists()
    assert await store.integrity() == []


class Synced:
    """Each ``fsync`` from now on: the path synced, and whether ``watched``
    (the file an erase removes) was still there then."""

    def __init__(self) -> None:
        self.watched = Path("/nonexistent")
        self.calls: list[tuple[str, bool]] = []


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Synced:
    synced = Synced()
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.calls.append((os.readlink(f"/proc/self/fd/{fd}"), synced.watched.exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_an_erase_syncs_its_note_and_after_the_unlink_the_directory(
    tmp_path: Path, fsynced: Synced, durability: str
) -> None:
    directory = tmp_path / "store"
    store = JsonlStore(directory, durability=durability)  # type: ignore[arg-type]
    await store.create(SessionMeta(id="s"))
    fsynced.watched = store.path("s")
    fsynced.calls.clear()
    await store.erase("s", reason="r")
    note = directory / ".erasing" / "session" / "s"
    if durability == "normal":
        assert str(note) not in [path for path, _ in fsynced.calls]
        return
    assert (str(note), True) in fsynced.calls  # before the file goes
    assert (str(note.parent), True) in fsynced.calls  # and its name
    assert (str(directory), False) in fsynced.calls  # the unlink survives a power loss


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_a_journal_erase_syncs_its_note_and_after_the_unlink_the_directory(
    tmp_path: Path, fsynced: Synced, durability: str
) -> None:
    directory = tmp_path / "store"
    store = JsonlStore(directory, durability=durability)  # type: ignore[arg-type]
    await store.journal("agent").append_raw(b"one")
    fsynced.watched = directory / "journals" / "agent" / "session_journal.jsonl"
    fsynced.calls.clear()
    await store.journal("agent").erase(reason="r")
    note = directory / ".erasing" / "journal" / "agent"
    if durability == "normal":
        assert str(note) not in [path for path, _ in fsynced.calls]
        return
    assert (str(note), True) in fsynced.calls
    assert (str(note.parent), True) in fsynced.calls
    assert (str(fsynced.watched.parent), False) in fsynced.calls
