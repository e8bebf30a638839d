"""Where the SQL store's transactions run: one thread hop each on SQLite.

A transaction is a plain function of a SQLAlchemy `Connection`. On SQLite
it runs whole in a worker thread on the blocking driver, so a transaction
costs one hop between the event loop and a thread, however many statements
it holds (an async driver pays a hop per statement, cursor and commit);
a quick read of a few rows runs on the event loop itself. On PostgreSQL it
runs on the async engine (psycopg) through ``run_sync``.

`Runner.steps` runs a transaction in several calls, for bodies that must
await between statements (an import consuming a stream); SQLite's
connection then stays checked out, in its transaction, between the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore.backends.base import Durability
from sessionstore.backends.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    DURABLE,
    WRITE,
    begin_on_driver,
    is_busy,
    is_sqlite,
    open_async_engine,
    open_sync_engine,
    parse_target,
)

__all__ = ["AsyncRunner", "Runner", "Step", "ThreadRunner", "Workers", "on_driver", "open_runner"]

_T = TypeVar("_T")

Step = Callable[[Callable[[Connection], _T]], Awaitable[_T]]


class Runner(Protocol):
    """Runs transaction bodies against one database."""

    url: URL
    sync_engine: Engine

    async def run(
        self,
        body: Callable[[Connection], _T],
        *,
        write: bool,
        durable: bool,
        quick: bool = False,
        lean: bool = False,
    ) -> _T:
        """Run ``body`` in one transaction and commit it.

        ``lean``: ``body`` runs only `Query` statements, on the driver, and
        the transaction may be begun and committed there too. ``quick``: a
        lean read of a few rows through indexes, which may run on the event
        loop itself.
        """
        ...

    def steps(self, *, write: bool) -> AbstractAsyncContextManager[Step[Any]]:
        """An async context: a transaction whose ``step(body)`` calls run in it."""
        ...

    async def dispose(self) -> None:
        """Close every connection."""
        ...


def _options(write: bool, durable: bool) -> dict[str, bool]:
    return {WRITE: True, DURABLE: durable} if write else {}


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


def on_driver(conn: Connection, body: Callable[[Connection], _T], write: bool, durable: bool) -> _T:
    """Run ``body`` in a transaction begun and ended on the driver alone:
    SQLAlchemy's begin and commit cost as much again as a small transaction.
    ``body`` must run its statements on the driver too (`Query`): one of
    SQLAlchemy's own would begin a second transaction, and fail."""
    pooled = conn.connection
    begin_on_driver(pooled, write=write, durable=durable)
    driver = pooled.dbapi_connection
    assert driver is not None
    try:
        result = body(conn)
    except BaseException:
        driver.rollback()
        raise
    driver.commit()
    return result


class ThreadRunner:
    """SQLite: each transaction runs whole in a worker thread, but quick reads.

    Writes run in one thread of their own (they take turns anyway), whose
    connection's page cache then stays valid from one append to the next;
    reads run in a few others, so that a long load never delays an append.
    Each thread keeps one connection open for the store's life: checking
    one out of SQLAlchemy's pool and back in cost about as much as a small
    transaction itself.

    A quick read (a few rows through indexes: a kept context asking what is
    new) runs on the event loop, on a connection of its own with no busy
    timeout: a read in WAL mode takes no lock a writer holds, and where
    SQLite would wait all the same (another process recovering the WAL after
    a crash), the read goes to a thread instead. It costs the loop about as
    long as the hop it saves would have (tens of microseconds).
    """

    def __init__(self, engine: Engine, readers: int = 3) -> None:
        self.sync_engine = engine
        self.url = engine.url
        self._writer = Workers(1, "sessionstore-sql-writer")
        self._readers = Workers(readers, "sessionstore-sql-reader")
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._opened_lock = threading.Lock()
        self._here: Connection | None = None
        self._driver_error = engine.dialect.loaded_dbapi.OperationalError

    def _connection(self, write: bool, durable: bool) -> Connection:
        """This thread's connection, set to begin its next transaction as asked."""
        local = self._local
        conn: Connection | None = getattr(local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = local.conn = self.sync_engine.connect()
            local.options = None
            with self._opened_lock:
                self._opened.append(conn)
        if local.options != (write, durable):
            conn.execution_options(**{WRITE: write, DURABLE: durable})  # in place
            local.options = (write, durable)
        return conn

    def _in_transaction(
        self, body: Callable[[Connection], _T], write: bool, durable: bool, lean: bool
    ) -> _T:
        conn = self._connection(write, durable)
        if lean:
            return on_driver(conn, body, write, durable)
        with conn.begin() as transaction:
            return body(transaction.connection)

    async def run(
        self,
        body: Callable[[Connection], _T],
        *,
        write: bool,
        durable: bool,
        quick: bool = False,
        lean: bool = False,
    ) -> _T:
        if quick and not write:
            here = self._here or await self._open_here()
            try:
                return on_driver(here, body, write=False, durable=False)
            except self._driver_error as exc:
                if not is_busy(exc):
                    raise
            # A lock SQLite would wait for: wait in a thread instead.
        workers = self._writer if write else self._readers
        return await workers.call(partial(self._in_transaction, body, write, durable, lean))

    async def _open_here(self) -> Connection:
        """The event loop's own connection, for quick reads: it never waits for a lock."""

        def connect() -> Connection:
            conn = self.sync_engine.connect()
            conn.connection.driver_connection.execute("PRAGMA busy_timeout=0")  # type: ignore[union-attr]
            with self._opened_lock:
                self._opened.append(conn)
            return conn

        conn = await self._readers.call(connect)
        if self._here is None:  # or another call opened one meanwhile
            self._here = conn
        return self._here

    @asynccontextmanager
    async def steps(self, *, write: bool) -> AsyncIterator[Step[Any]]:
        call = (self._writer if write else self._readers).call
        conn = await call(self.sync_engine.connect)
        try:
            if write:
                conn = conn.execution_options(**_options(write, False))
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
        for conn in self._opened:
            conn.close()
        self.sync_engine.dispose()

    async def dispose(self) -> None:
        await asyncio.to_thread(self._close)


class AsyncRunner:
    """PostgreSQL: transactions run on the async engine through ``run_sync``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sync_engine = engine.sync_engine
        self.url = engine.url

    async def run(
        self,
        body: Callable[[Connection], _T],
        *,
        write: bool,
        durable: bool,
        quick: bool = False,
        lean: bool = False,
    ) -> _T:
        async with self.engine.connect() as conn:
            if write:
                conn = await conn.execution_options(**_options(write, durable))
            async with conn.begin():
                return await conn.run_sync(body)

    @asynccontextmanager
    async def steps(self, *, write: bool) -> AsyncIterator[Step[Any]]:
        async with self.engine.connect() as conn:
            if write:
                conn = await conn.execution_options(**_options(write, False))
            async with conn.begin():
                yield conn.run_sync

    async def dispose(self) -> None:
        await self.engine.dispose()


def open_runner(
    target: str,
    *,
    durability: Durability = "normal",
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
) -> Runner:
    """Where a store's transactions run: threads on SQLite, async on PostgreSQL."""
    if is_sqlite(parse_target(target)):
        return ThreadRunner(
            open_sync_engine(target, durability=durability, busy_timeout=busy_timeout, pooled=True)
        )
    return AsyncRunner(open_async_engine(target, durability=durability, busy_timeout=busy_timeout))
