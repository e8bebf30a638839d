"""FileJournal beyond the contract: the file itself, torn writes, crashes."""

import signal
import stat
import uuid
from pathlib import Path

import pytest

from sessionstore import FileJournal, Journal, StorageError, encode_line, open_store
from sessionstore.testing.journal_contract import header, post
from tests.helpers import WORKERS, ForkServer
from tests.kinds import PERSISTENT_JOURNAL_KINDS, StoreTargets


async def test_in_dir_names_the_seed_file(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    assert journal.path == tmp_path / "session_journal.jsonl"


async def test_file_holds_one_canonical_line_per_append(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    p = post(1)
    await journal.begin(header(0), Journal())
    await journal.append(p)
    assert journal.path.read_bytes() == encode_line(header(0)) + encode_line(p)
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600


async def test_a_torn_write_never_eats_the_next_line(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    p, q = post(1), post(2)
    await journal.begin(header(0), Journal())
    await journal.append(p)
    # Power lost mid-append: half a line, no newline.
    with journal.path.open("ab") as file:
        file.write(b'{"line":"post","at":"2026-10')
    await journal.append(q)
    read = await journal.read()
    assert read.skipped == [3]
    assert read.sessions[0].writes == [p, q]
    assert journal.path.read_bytes().endswith(b"\n" + encode_line(q))


async def test_clear_removes_the_file_and_begin_without_writes_starts_afresh(
    tmp_path: Path,
) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.begin(header(0), Journal())
    await journal.clear()
    assert not journal.path.exists()
    await journal.begin(header(1), await journal.read())
    assert journal.path.read_bytes() == encode_line(header(1))


async def test_missing_agent_directory_is_created_by_the_first_append(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path / "agents" / "a1")
    assert await journal.read() == Journal()
    await journal.append(post(1))
    assert (await journal.read()).writes() == 1


async def test_unreadable_journal_is_a_storage_error(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)  # a directory, not a file
    with pytest.raises(StorageError, match=str(tmp_path)):
        await journal.read()


async def test_jsonl_store_keeps_journals_beside_its_sessions(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await store.journal("agent").append(post(1))
        assert await store.journals() == ["agent"]
        await store.journal("agent").clear()
        assert await store.journals() == []
    assert (tmp_path / "journals" / "agent").is_dir()


async def kill_while_appending(worker_kind: str, where: str, rounds: int) -> list[int]:
    """Kill journal writers mid-append; return how many appends each had seen return."""
    returned = []
    async with ForkServer(WORKERS / "journal_appender.py") as server:
        for round_ in range(rounds):
            worker = await server.run(worker_kind, where, "1000000")
            for _ in range(3 + round_ * 2):
                await worker.readline()
            worker.kill()
            rest = await worker.read()
            assert await worker.wait() == -signal.SIGKILL
            returned.append(3 + round_ * 2 + len(rest.split()))
    return returned


@pytest.mark.parametrize("kind", PERSISTENT_JOURNAL_KINDS)
async def test_appends_that_returned_survive_sigkill(
    store_targets: StoreTargets, kind: str
) -> None:
    if kind == "file":
        where = str(store_targets.directory("agent"))
        returned = await kill_while_appending("file", where, 10)
        read = await FileJournal.in_dir(where).read()
    else:
        where = store_targets.new(kind)
        returned = await kill_while_appending("store", where, 10)
        async with open_store(where) as store:
            read = await store.journal("agent").read()
    # Each round began after a leftover with writes, so every round is kept.
    assert len(read.sessions) == 10
    for session, done in zip(read.sessions, returned, strict=True):
        ids = [write.id for write in session.writes]
        assert ids[:done] == [uuid.UUID(int=n) for n in range(done)]
        assert len(ids) in (done, done + 1)  # at most the append in flight more
    # A kill can tear a file line; a torn line is skipped, never fatal.
    assert len(read.skipped) <= 10
