"""Group commit: appends gathered while a transaction runs, and their failures."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from sessionstore import (
    SessionMeta,
    SessionNotFoundError,
    SessionStoreError,
    SqlStore,
    StorageError,
)
from sessionstore.backends.checks import Durability
from sessionstore.backends.records import entry_lines
from sessionstore.backends.sql import group
from sessionstore.testing.contract import message
from tests.helpers import traced


async def test_appends_of_tasks_started_together_gather_in_the_writer_thread(
    tmp_path: Path,
) -> None:
    """Appends that arrive together share transactions, run by the writer
    thread while the next ones gather on the loop."""
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        session_id = await store.create(SessionMeta(id="s"))
        threads: list[str] = []
        statements = traced(store, threads)
        await asyncio.gather(*(store.append(session_id, message(f"e{n}", "x")) for n in range(20)))
        ran = list(zip(statements, threads, strict=True))
        begins = [sql for sql, _ in ran if sql.startswith("BEGIN")]
        assert 1 <= len(begins) < 20  # gathered: fewer transactions than appends
        assert set(begins) == {"BEGIN IMMEDIATE"}  # each a writer's, lock taken up front
        inserts = {thread for sql, thread in ran if sql.startswith("INSERT INTO entries")}
        assert inserts == {"sessionstore-sql-writer-0"}
        assert [e.id for e in await store.load(session_id)] == [f"e{n}" for n in range(20)]


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_a_lone_append_commits_on_the_writer_thread_never_on_the_loop(
    tmp_path: Path, durability: Durability
) -> None:
    """Even a commit that waits for no disk (durability "normal") does I/O,
    which would stall every task on the loop: it runs in the writer thread."""
    async with await SqlStore.open(str(tmp_path / "s.db"), durability=durability) as store:
        session_id = await store.create(SessionMeta(id="s"))
        threads: list[str] = []
        statements = traced(store, threads)
        for n in range(3):
            await store.append(session_id, message(f"e{n}", "x"))
        ran = list(zip(statements, threads, strict=True))
        inserts = {thread for sql, thread in ran if sql.startswith("INSERT INTO entries")}
        assert inserts == {"sessionstore-sql-writer-0"}
        assert [sql for sql, _ in ran if sql.startswith("BEGIN")] == ["BEGIN IMMEDIATE"] * 3


async def test_an_append_waits_in_the_writer_thread_for_another_process_writing(
    tmp_path: Path,
) -> None:
    """While another connection holds the write lock, the append waits its
    turn in the writer thread, the loop free, and commits once it is free."""
    db = tmp_path / "s.db"
    async with await SqlStore.open(str(db)) as store:
        session_id = await store.create(SessionMeta(id="s"))
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        threads: list[str] = []
        statements = traced(store, threads)
        append = asyncio.create_task(store.append(session_id, message("e1", "x")))
        await asyncio.sleep(0.2)
        assert not append.done()  # waiting, and the loop is free meanwhile
        other.execute("COMMIT")
        other.close()
        await append
        ran = zip(statements, threads, strict=True)
        inserts = {thread for sql, thread in ran if sql.startswith("INSERT INTO entries")}
        assert inserts == {"sessionstore-sql-writer-0"}
        assert [e.id for e in await store.load(session_id)] == ["e1"]


async def test_a_failed_gathered_transaction_fails_its_callers_and_the_next_one_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, proceed = threading.Event(), threading.Event()
    write_appends = group.write_appends

    alone, gathered = threading.Event(), threading.Event()

    def fail_the_first_gathering(
        appends: Sequence[group.Append], conn: Any, sealer: None = None
    ) -> Any:
        if len(appends) == 1 and not alone.is_set():
            alone.set()
            gathered.wait(5)  # a0 commits alone, while a1 and a2 gather
        elif len(appends) > 1 and not started.is_set():
            started.set()
            proceed.wait(5)  # meanwhile more appends gather
            raise sqlite3.OperationalError("disk I/O error")
        return write_appends(appends, conn, sealer)

    monkeypatch.setattr(group, "write_appends", fail_the_first_gathering)
    # At full durability every write runs in the writer thread, where it can wait.
    async with await SqlStore.open(str(tmp_path / "s.db"), durability="full") as store:
        session_id = await store.create(SessionMeta(id="s"))
        first = [asyncio.create_task(store.append(session_id, message("a0", "x")))]
        await asyncio.to_thread(alone.wait, 5)
        first += [
            asyncio.create_task(store.append(session_id, message(f"a{n}", "x"))) for n in (1, 2)
        ]
        await asyncio.sleep(0.01)
        gathered.set()
        await asyncio.to_thread(started.wait, 5)  # a0 committed alone; a1, a2 are failing
        later = [
            asyncio.create_task(store.append(session_id, message(f"b{n}", "y"))) for n in range(2)
        ]
        await asyncio.sleep(0.01)  # they gather behind the failing transaction
        proceed.set()
        results = await asyncio.wait_for(asyncio.gather(*first, *later, return_exceptions=True), 5)
        assert results[0] is None
        assert all(isinstance(r, StorageError) and "disk I/O error" in str(r) for r in results[1:3])
        assert results[3:] == [None, None]  # the next gathering committed
        await asyncio.wait_for(store.append(session_id, message("c", "z")), 5)  # not stuck
        assert [e.id for e in await store.load(session_id)] == ["a0", "b0", "b1", "c"]


async def test_a_caller_that_gives_up_waiting_leaves_the_others_to_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, proceed = threading.Event(), threading.Event()
    write_appends = group.write_appends

    def slow_gathering(appends: Sequence[group.Append], conn: Any, sealer: None = None) -> Any:
        if len(appends) > 1 and not started.is_set():
            started.set()
            proceed.wait(5)
        return write_appends(appends, conn, sealer)

    monkeypatch.setattr(group, "write_appends", slow_gathering)
    # At full durability every write runs in the writer thread, where it can wait.
    async with await SqlStore.open(str(tmp_path / "s.db"), durability="full") as store:
        session_id = await store.create(SessionMeta(id="s"))
        append = store.append
        tasks = [asyncio.create_task(append(session_id, message(f"a{n}", "x"))) for n in range(4)]
        await asyncio.to_thread(started.wait, 5)  # a0..a3 are committing together
        tasks[1].cancel()  # a1's caller gives up; its append still stands
        proceed.set()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
        assert isinstance(results[1], asyncio.CancelledError)
        assert [results[0], *results[2:]] == [None, None, None]
        assert [e.id for e in await store.load(session_id)] == ["a0", "a1", "a2", "a3"]


async def test_a_transaction_of_several_sessions_chains_each_as_one_of_its_own(
    tmp_path: Path,
) -> None:
    """On SQLite the sessions of a transaction are read at once: each append
    (to a new session, a long one, a fork holding no entry of its own) chains
    as it does alone, and one to a session that is not there is refused."""
    path = tmp_path / "s.db"
    async with await SqlStore.open(str(path)) as store:
        await store.create(SessionMeta(id="new"))
        long = await store.create(SessionMeta(id="long"))
        for n in range(5):
            await store.append(long, message(f"l{n}", "x"))
        await store.fork(long, at="l2", meta=SessionMeta(id="fork"))
    alone = tmp_path / "alone.db"
    alone.write_bytes(path.read_bytes())  # checkpointed at close
    ids = ["new", "long", "gone", "fork"]
    appends: list[group.Append] = [
        (session_id, [group.entry_row(entry, line)], None, None)
        for session_id in ids
        for entry in [message(f"{session_id}-1", "y")]
        for line in entry_lines(session_id, [entry])
    ]
    together = _written(path, [appends])
    assert [type(error) for error in together[0]] == [type(None)] * 2 + [
        SessionNotFoundError,
        type(None),
    ]
    one_by_one = _written(alone, [[append] for append in appends])
    assert isinstance(one_by_one[2][0], SessionNotFoundError)
    assert _chains(path) == _chains(alone)


def _written(
    path: Path, transactions: Sequence[Sequence[group.Append]]
) -> list[list[SessionStoreError | None]]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            found = []
            for appends in transactions:
                errors, _ = group.write_appends(appends, conn)
                conn.connection.dbapi_connection.commit()  # type: ignore[union-attr]
                found.append(errors)
            return found
    finally:
        engine.dispose()


def _chains(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT s.id, e.seq, e.entry_id, e.digest FROM entries AS e"
            " JOIN sessions AS s ON s.pk = e.session_pk ORDER BY s.id, e.seq"
        ).fetchall()
