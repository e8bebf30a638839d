"""The SQL store's one error boundary: transactions, retries, translation, closing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from sessionstore import CorruptSessionError, SqlStore, StorageError
from sessionstore.backends.sql.database import Database, Kind, WriterLock


class FakeRunner:
    """Records how each transaction was asked for, and runs its body."""

    url = make_url("sqlite:////fake/sessions.db")
    sync_engine = SimpleNamespace(dialect=SimpleNamespace(loaded_dbapi=sqlite3))

    def __init__(self) -> None:
        self.calls: list[Kind] = []
        self.disposed = 0

    async def run(self, body: Callable[[Any], Any], kind: Kind) -> Any:
        self.calls.append(kind)
        return body(None)

    async def dispose(self) -> None:
        self.disposed += 1


def fake_database() -> tuple[Database, FakeRunner]:
    runner = FakeRunner()
    return Database(runner), runner  # type: ignore[arg-type]


async def test_each_kind_of_transaction_is_asked_of_the_runner_as_it_is() -> None:
    db, runner = fake_database()
    assert await db.transaction(Kind.READ, None, lambda conn: 1) == 1
    for kind in Kind:
        await db.transaction(kind, None, lambda conn: 2)
    assert runner.calls == [Kind.READ, *Kind]


def failing(errors: list[BaseException]) -> Callable[[Any], str]:
    def body(conn: Any) -> str:
        if errors:
            raise errors.pop(0)
        return "done"

    return body


@pytest.fixture
def naps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def nap(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("sessionstore.backends.sql.database.asyncio.sleep", nap)
    return slept


async def test_a_writer_locked_out_is_tried_again_with_growing_waits(naps: list[float]) -> None:
    db, runner = fake_database()
    locked: list[BaseException] = [sqlite3.OperationalError("database is locked")] * 3
    assert await db.transaction(Kind.WRITE, "s", failing(locked)) == "done"
    assert len(runner.calls) == 4
    assert naps == [0.1, 0.2, 0.4]


async def test_a_writer_locked_out_five_times_more_gets_a_storage_error(
    naps: list[float],
) -> None:
    db, runner = fake_database()
    locked: list[BaseException] = [sqlite3.OperationalError("database is locked")] * 7
    with pytest.raises(StorageError, match="database is locked") as caught:
        await db.transaction(Kind.WRITE, "s", failing(locked))
    assert caught.value.session_id == "s"
    assert len(runner.calls) == 6  # the first try and five more
    assert naps == [0.1, 0.2, 0.4, 0.8, 1.6]


async def test_any_other_driver_error_is_a_storage_error_at_once(naps: list[float]) -> None:
    db, runner = fake_database()
    with pytest.raises(StorageError) as caught:
        await db.transaction(Kind.READ, "s", failing([sqlite3.OperationalError("disk I/O error")]))
    assert f"{db.where}: disk I/O error" in str(caught.value)
    assert caught.value.session_id == "s"
    assert len(runner.calls) == 1
    assert naps == []


async def test_text_that_is_not_utf8_is_corrupt_data_and_never_quoted() -> None:
    db, _ = fake_database()
    error = sqlite3.OperationalError("Could not decode to UTF-8 column 'line' with text 'SECRET'")
    with pytest.raises(CorruptSessionError) as caught:
        await db.transaction(Kind.READ, "s", failing([error]))
    assert caught.value.session_id == "s"
    assert caught.value.path == db.where
    assert "not valid UTF-8" in str(caught.value)
    assert "SECRET" not in str(caught.value)
    with pytest.raises(StorageError) as without:
        await db.transaction(Kind.READ, None, failing([error]))
    assert str(without.value) == (
        f"{db.where}: a stored text is not valid UTF-8 (`sessionstore verify` names the row)"
    )


async def test_a_closed_database_refuses_naming_the_session_and_closes_once() -> None:
    db, runner = fake_database()
    db.check_open("s")  # open: nothing to say
    await db.close()
    await db.close()
    assert runner.disposed == 1
    with pytest.raises(StorageError) as caught:
        db.check_open("s")
    assert str(caught.value) == "session 's': SqlStore is closed"
    assert caught.value.session_id == "s"


async def test_a_waiter_whose_loop_closed_is_passed_over() -> None:
    lock = WriterLock()
    queued = threading.Event()
    abandoned: list[asyncio.Task[None]] = []

    def wait_on_a_loop_that_then_closes() -> None:
        loop = asyncio.new_event_loop()

        async def wait() -> None:
            async with lock.held():
                pass

        abandoned.append(loop.create_task(wait()))
        loop.run_until_complete(asyncio.sleep(0.05))  # the task queues, and waits
        queued.set()
        loop.close()  # gone, its waiter still in the queue

    async with lock.held():
        thread = threading.Thread(target=wait_on_a_loop_that_then_closes)
        thread.start()
        await asyncio.to_thread(queued.wait)
        thread.join()
        after = asyncio.create_task(_hold(lock))
        await asyncio.sleep(0)
    await asyncio.wait_for(after, 2)  # handed on past the closed loop


async def _hold(lock: WriterLock) -> None:
    async with lock.held():
        pass


async def test_a_driver_error_is_named_by_the_driver_alone(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        db = store.database

        def broken(conn: Connection) -> None:
            conn.exec_driver_sql("SELECT * FROM no_such_table")

        with pytest.raises(StorageError) as caught:
            await db.transaction(Kind.READ, None, broken)
    assert str(caught.value) == f"{db.where}: no such table: no_such_table"  # no SQL, no links


async def test_a_waiter_cancelled_after_its_turn_was_handed_over_passes_the_lock_once() -> None:
    lock = WriterLock()
    inside = asyncio.Event()
    leave = asyncio.Event()

    async def third_writer() -> None:
        async with lock.held():
            inside.set()
            await leave.wait()

    async with lock.held():
        second = asyncio.create_task(_hold(lock))
        third = asyncio.create_task(third_writer())
        await asyncio.sleep(0)  # both queue
    second.cancel()  # the lock is on its way to it: it must pass it on, once
    await asyncio.wait_for(inside.wait(), 2)
    fourth = asyncio.create_task(_hold(lock))
    await asyncio.sleep(0.01)
    assert not fourth.done()  # the third holds the lock: nobody else may
    leave.set()
    await asyncio.wait_for(asyncio.gather(third, fourth), 2)
    with pytest.raises(asyncio.CancelledError):
        await second
