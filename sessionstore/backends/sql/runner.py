"""Where the SQL store's transactions run: one thread hop each.

A transaction is a plain function of a SQLAlchemy `Connection`. It runs
whole in a worker thread on the blocking driver (sqlite3, or psycopg for
PostgreSQL), so a transaction costs one hop between the event loop and a
thread, however many statements it holds (an async driver pays a hop per
statement, cursor and commit). None runs on the event loop (see `Runner`).

Nothing here belongs to an event loop: a call's result goes back to the
loop that awaits it, so one store serves any number of threads and event
loops at once.

`Runner.steps` runs a transaction in several calls, for bodies that must
await between statements (an import consuming a stream); its connection
then stays checked out, in its transaction, between the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from sessionstore.backends.checks import Durability
from sessionstore.backends.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    WRITE,
    begin_on_driver,
    is_sqlite,
    open_sync_engine,
)

__all__ = ["Kind", "Runner", "Step", "Workers", "on_driver", "open_runner"]

_T = TypeVar("_T")

Step = Callable[[Callable[[Connection], _T]], Awaitable[_T]]


class Kind(enum.Enum):
    """What a transaction does, named at each call: how it runs follows.

    Every kind commits whole or not at all; a body may run `Query`
    statements on the driver and SQLAlchemy's own alike.
    """

    READ = "read"
    """Reads what is committed. On SQLite one transaction, one snapshot. On
    PostgreSQL each statement commits alone: at READ COMMITTED each takes
    a snapshot of its own in a transaction too, so it sees what it would
    have, and the BEGIN and COMMIT round trips are spared (a one-statement
    read is one round trip, not three)."""

    LOCKED_READ = "locked read"
    """A read in one transaction on every database, for a body that locks
    (``FOR SHARE``, ``LOCK TABLE``) or sets its isolation (``REPEATABLE
    READ``: one snapshot on PostgreSQL): what it took holds to its end."""

    WRITE = "write"
    """Writes, one writer at a time: the database's writer lock, then on
    SQLite ``BEGIN IMMEDIATE``; a writer locked out by another process is
    tried again. Its commit survives a crash of the process, and a power
    loss at ``durability="full"`` (always, on PostgreSQL)."""

    DURABLE_WRITE = "durable write"
    """A write whose commit survives a power loss at any durability: on
    SQLite it commits with a full fsync (``synchronous=FULL``)."""

    @property
    def writes(self) -> bool:
        """Whether it writes (takes the writer lock)."""
        return self is not Kind.READ and self is not Kind.LOCKED_READ


_Job = tuple[Callable[[], Any], "asyncio.Future[Any]"]


def _resolve(future: asyncio.Future[_T], result: _T, error: BaseException | None) -> None:
    if future.done():
        return  # its caller was cancelled; what the call did stands
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class Workers:
    """Threads running blocking calls for an event loop, fed from one queue.

    Leaner than ``loop.run_in_executor``: a call is one queue put and its
    result one ``call_soon_threadsafe``, with no concurrent future chained
    between them; that halves the cost of a hop here (about 55 us instead
    of 120 us on a 2-CPU machine).
    """

    def __init__(self, count: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def call(self, fn: Callable[[], _T]) -> asyncio.Future[_T]:
        """Run ``fn`` in one of the threads; its result, awaitable on this loop."""
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        self._jobs.put((fn, future))
        return future

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            del job
            result, error = None, None
            try:
                result = fn()
            except BaseException as exc:  # the caller's to handle, whatever it is
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed: no one to tell
                future.get_loop().call_soon_threadsafe(_resolve, future, result, error)
            del fn, future, result, error

    def stop(self) -> None:
        """Let queued calls end, then the threads (blocking)."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()


def on_driver(
    conn: Connection, body: Callable[[Connection], _T], *, write: bool, durable: bool
) -> _T:
    """Run ``body`` in a SQLite transaction begun on the driver, and commit it."""
    begin_on_driver(conn.connection, write=write, durable=durable)
    return finish_on_driver(conn, body)


def finish_on_driver(conn: Connection, body: Callable[[Connection], _T]) -> _T:
    """Run ``body`` in the transaction begun on ``conn``'s driver, and commit
    it (roll it back when ``body`` raises). Begun on the driver, commit
    included: SQLAlchemy's begin and commit cost as much again as a small
    transaction. A body's SQLAlchemy statement begins SQLAlchemy's own on
    top of it (beginning nothing more: `engine`), which then ends it."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    try:
        result = body(conn)
    except BaseException:
        conn.rollback() if conn.in_transaction() else driver.rollback()
        raise
    conn.commit() if conn.in_transaction() else driver.commit()
    return result


def _autocommitted(conn: Connection, body: Callable[[Connection], _T]) -> _T:
    """Run a read on PostgreSQL, each statement committed on its own (`Kind.READ`)."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.autocommit = True
    try:
        return finish_on_driver(conn, body)
    finally:
        if not driver.closed:
            driver.autocommit = False


class Runner:
    """Each transaction runs whole in a worker thread, never on an event loop.

    Writes run in one thread of their own (they take turns anyway), whose
    connection's page cache then stays valid from one append to the next;
    reads run in a few others, so that a long load never delays an append.
    Each thread keeps one connection open for the store's life: checking
    one out of SQLAlchemy's pool and back in cost about as much as a small
    transaction itself.

    No statement runs on the event loop's thread, however small: a few
    rows read or a commit of WAL frames take tens of microseconds, but
    their I/O can wait for milliseconds (a page read from disk, the file
    system busy), and all that time every task on the loop waits too.
    """

    def __init__(self, engine: Engine, readers: int = 3) -> None:
        self.sync_engine = engine
        self.url = engine.url
        self._sqlite = is_sqlite(engine.url)
        self._writer = Workers(1, "sessionstore-sql-writer")
        self._readers = Workers(readers, "sessionstore-sql-reader")
        self._local = threading.local()  # each thread's connection
        self._opened: list[Connection] = []
        self._opened_lock = threading.Lock()

    def _open(self) -> Connection:
        conn = self.sync_engine.connect()
        with self._opened_lock:
            self._opened.append(conn)
        return conn

    def _connection(self) -> Connection:
        """This thread's connection."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._local.conn = self._open()
        return conn

    def _in_transaction(self, body: Callable[[Connection], _T], kind: Kind) -> _T:
        conn = self._connection()
        if not self._sqlite:  # PostgreSQL's driver begins by itself
            if kind is Kind.READ:
                return _autocommitted(conn, body)
            return finish_on_driver(conn, body)
        return on_driver(conn, body, write=kind.writes, durable=kind is Kind.DURABLE_WRITE)

    async def run(self, body: Callable[[Connection], _T], kind: Kind) -> _T:
        """Run ``body`` as a transaction of ``kind``, and commit it."""
        workers = self._writer if kind.writes else self._readers
        return await workers.call(partial(self._in_transaction, body, kind))

    async def checkpoint(self) -> bool:
        """SQLite: copy the WAL into the database file and truncate it to
        nothing (``wal_checkpoint(TRUNCATE)``, waiting up to the busy
        timeout for other connections' readers); whether it completed.
        PostgreSQL: nothing to do (True)."""
        if not self._sqlite:
            return True

        def run() -> bool:
            driver = self._connection().connection.dbapi_connection
            assert driver is not None
            cursor = driver.cursor()
            try:
                busy, _, _ = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                cursor.close()
            return not busy

        return await self._writer.call(run)

    @asynccontextmanager
    async def steps(self) -> AsyncIterator[Step[Any]]:
        """A write transaction run in several calls (`Database.steps`)."""
        call = self._writer.call
        conn = await call(self.sync_engine.connect)
        try:
            conn = conn.execution_options(**{WRITE: True})
            transaction = await call(conn.begin)
            try:
                yield lambda body: call(partial(body, conn))
            except BaseException:
                await call(transaction.rollback)
                raise
            await call(transaction.commit)
        finally:
            await call(conn.close)

    def connections(self) -> list[Connection]:
        """The connections open now (for tools that watch them: tests' traces)."""
        with self._opened_lock:
            return list(self._opened)

    def _close(self) -> None:
        # Running transactions end first.
        self._writer.stop()
        self._readers.stop()
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self.sync_engine.dispose()

    async def dispose(self) -> None:
        await asyncio.to_thread(self._close)


def open_runner(
    target: str,
    *,
    durability: Durability = "normal",
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
) -> Runner:
    """Where a store's transactions run: worker threads on a blocking engine."""
    engine = open_sync_engine(target, durability=durability, busy_timeout=busy_timeout, pooled=True)
    return Runner(engine)
