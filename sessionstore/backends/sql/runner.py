"""Where the SQL store's transactions run: one thread hop each.

A transaction is a plain function of a SQLAlchemy `Connection`. It runs
whole in a worker thread on the blocking driver (sqlite3, or psycopg for
PostgreSQL), so a transaction costs one hop between the event loop and a
thread, however many statements it holds (an async driver pays a hop per
statement, cursor and commit). On SQLite a quick read of a few rows, and
at durability "normal" a quick write (one append), run on the event loop
itself, where they cost less than the hop would (see `Runner`).

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
    is_busy,
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

    QUICK_READ = "quick read"
    """A read of a few statements through indexes, each of a few rows: on
    SQLite it may run on the event loop's thread (see `Runner`)."""

    WRITE = "write"
    """Writes, one writer at a time: the database's writer lock, then on
    SQLite ``BEGIN IMMEDIATE``; a writer locked out by another process is
    tried again. Its commit survives a crash of the process, and a power
    loss at ``durability="full"`` (always, on PostgreSQL)."""

    QUICK_WRITE = "quick write"
    """A write of a few rows (one append, a create, a fork, a title): on
    SQLite at durability "normal" it may commit on the event loop's thread
    (see `Runner`)."""

    DURABLE_WRITE = "durable write"
    """A write whose commit survives a power loss at any durability: on
    SQLite it commits with a full fsync (``synchronous=FULL``)."""

    @property
    def writes(self) -> bool:
        """Whether it writes (takes the writer lock)."""
        return self in (Kind.WRITE, Kind.QUICK_WRITE, Kind.DURABLE_WRITE)


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


_CHECKPOINT_EVERY = 100
"""Writes on the event loop between two checkpoints of the WAL, run by the
writer thread (a checkpoint's fsync would stall the loop): about 700 pages
for appends, below SQLite's own 1,000."""


def _ignored(future: asyncio.Future[Any]) -> None:
    """A checkpoint in passing that failed is left to the next one."""
    if not future.cancelled():
        future.exception()


class Runner:
    """Each transaction runs whole in a worker thread; on SQLite, quick reads
    run on the event loop.

    Writes run in one thread of their own (they take turns anyway), whose
    connection's page cache then stays valid from one append to the next;
    reads run in a few others, so that a long load never delays an append.
    Each thread keeps one connection open for the store's life: checking
    one out of SQLAlchemy's pool and back in cost about as much as a small
    transaction itself.

    On SQLite at durability "normal", a quick write (one append, a
    create, a fork, a title: a few rows, and a commit that writes WAL
    frames without waiting for a disk) runs on the event loop's thread
    too, on the same connection: when
    another connection holds the write lock, it goes to the writer thread
    to wait. That connection never checkpoints (an fsync); the writer
    thread checkpoints in passing every `_CHECKPOINT_EVERY` of its commits.

    On SQLite, a quick read (a few statements through indexes, each
    reading a few rows: a cached context asking what is new, or a short
    context read afresh) runs on the event loop's thread, on a connection
    of that thread's own with no busy timeout: a read in WAL mode takes no
    lock a writer holds, and where SQLite would wait all the same (another
    process recovering the WAL after a crash), the read goes to a worker
    thread instead. It costs the loop about as long as the hop it saves
    would have (tens of microseconds).
    """

    def __init__(self, engine: Engine, readers: int = 3, inline_writes: bool = False) -> None:
        self.sync_engine = engine
        self.url = engine.url
        self._sqlite = is_sqlite(engine.url)
        self._inline_writes = inline_writes and self._sqlite
        self._written_here = 0  # writes run on an event loop's thread
        self._writer = Workers(1, "sessionstore-sql-writer")
        self._readers = Workers(readers, "sessionstore-sql-reader")
        self._local = threading.local()  # each thread's connection
        self._opened: list[Connection] = []
        self._opened_lock = threading.Lock()
        # The connections of event loops' threads (`_here`), by thread: a
        # thread that ran ``asyncio.run`` once and ended leaves its own.
        self._here_owners: dict[Connection, threading.Thread] = {}
        self._driver_error = engine.dialect.loaded_dbapi.OperationalError

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
            if kind in (Kind.READ, Kind.QUICK_READ):
                return _autocommitted(conn, body)
            return finish_on_driver(conn, body)
        return on_driver(conn, body, write=kind.writes, durable=kind is Kind.DURABLE_WRITE)

    async def run(self, body: Callable[[Connection], _T], kind: Kind) -> _T:
        """Run ``body`` as a transaction of ``kind``, and commit it."""
        if kind is Kind.QUICK_READ and self._sqlite:
            try:
                return on_driver(self._here(), body, write=False, durable=False)
            except self._driver_error as exc:
                if not is_busy(exc):
                    raise
            # A lock SQLite would wait for: wait in a thread instead.
        elif kind is Kind.QUICK_WRITE and self._inline_writes:
            here = self._here()
            try:
                begin_on_driver(here.connection, write=True, durable=False)
            except self._driver_error as exc:
                if not is_busy(exc):
                    raise
                # Another process writes: wait for it in the writer thread.
            else:
                result = finish_on_driver(here, body)
                self._written_here += 1
                if self._written_here % _CHECKPOINT_EVERY == 0:
                    self._writer.call(self._checkpoint_passive).add_done_callback(_ignored)
                return result
        workers = self._writer if kind.writes else self._readers
        return await workers.call(partial(self._in_transaction, body, kind))

    def _here(self) -> Connection:
        """This thread's connection for the transactions run on it."""
        here: Connection | None = getattr(self._local, "here", None)
        return here if here is not None else self._open_here()

    def _open_here(self) -> Connection:
        """This thread's connection for quick reads: it never waits for a lock.

        Opening a SQLite connection takes well under a millisecond, once
        per thread that runs an event loop using the store. Those of
        threads that have ended are closed first: a store outlives the
        threads that use it once each (``asyncio.run`` in a new thread per
        request, as ``Runner.run_sync`` in workers does).
        """
        self._close_ended_threads()
        conn = self._local.here = self._open()
        with self._opened_lock:
            self._here_owners[conn] = threading.current_thread()
        driver = conn.connection.driver_connection
        assert driver is not None
        driver.execute("PRAGMA busy_timeout=0")
        # Its commits never checkpoint: the writer thread does, in passing.
        driver.execute("PRAGMA wal_autocheckpoint=0")
        return conn

    def _close_ended_threads(self) -> None:
        """Close the `_here` connections of threads that have ended. Their
        settings (no busy timeout, no checkpoints) are not for other
        threads: they leave the pool (invalidated), never to be reused."""
        with self._opened_lock:
            ended = [conn for conn, owner in self._here_owners.items() if not owner.is_alive()]
            for conn in ended:
                del self._here_owners[conn]
                self._opened.remove(conn)
        for conn in ended:
            conn.invalidate()

    def _checkpoint_passive(self) -> None:
        """Copy what the WAL holds into the database file, waiting for nobody
        (``PASSIVE``), on the writer thread's connection."""
        driver = self._connection().connection.dbapi_connection
        assert driver is not None
        driver.execute("PRAGMA wal_checkpoint(PASSIVE)").close()

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
            self._here_owners.clear()
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
    # A write of a few rows commits on the event loop, where a commit does
    # not wait for a disk (durability="normal": WAL frames, no fsync).
    return Runner(engine, inline_writes=durability == "normal")
