"""Where the SQL store's transactions run: one thread hop each on SQLite.

A transaction is a plain function of a SQLAlchemy `Connection`. On SQLite
it runs whole in a worker thread on the blocking driver, so a transaction
costs one hop between the event loop and a thread, however many statements
it holds (an async driver pays a hop per statement, cursor and commit). On
PostgreSQL it runs on the async engine (psycopg) through ``run_sync``.

`Runner.steps` runs a transaction in several calls, for bodies that must
await between statements (an import consuming a stream); SQLite's
connection then stays checked out, in its transaction, between the calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore.backends.sql.engine import DURABLE, WRITE

__all__ = ["AsyncRunner", "Runner", "Step", "ThreadRunner"]

_T = TypeVar("_T")

Step = Callable[[Callable[[Connection], _T]], Awaitable[_T]]


class Runner(Protocol):
    """Runs transaction bodies against one database."""

    url: URL
    sync_engine: Engine

    async def run(self, body: Callable[[Connection], _T], *, write: bool, durable: bool) -> _T:
        """Run ``body`` in one transaction and commit it."""
        ...

    def steps(self, *, write: bool) -> AbstractAsyncContextManager[Step[Any]]:
        """An async context: a transaction whose ``step(body)`` calls run in it."""
        ...

    async def dispose(self) -> None:
        """Close every connection."""
        ...


def _options(write: bool, durable: bool) -> dict[str, bool]:
    return {WRITE: True, DURABLE: durable} if write else {}


class ThreadRunner:
    """SQLite: each transaction runs whole in a worker thread.

    Each worker thread keeps one connection open for the store's life:
    checking one out of SQLAlchemy's pool and back in cost about as much as
    a small transaction itself.
    """

    def __init__(self, engine: Engine, workers: int = 4) -> None:
        self.sync_engine = engine
        self.url = engine.url
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sessionstore-sql")
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._opened_lock = threading.Lock()

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

    def _in_transaction(self, body: Callable[[Connection], _T], write: bool, durable: bool) -> _T:
        with self._connection(write, durable).begin() as transaction:
            return body(transaction.connection)

    async def run(self, body: Callable[[Connection], _T], *, write: bool, durable: bool) -> _T:
        loop = asyncio.get_running_loop()
        call = partial(self._in_transaction, body, write, durable)
        return await loop.run_in_executor(self._pool, call)

    @asynccontextmanager
    async def steps(self, *, write: bool) -> AsyncIterator[Step[Any]]:
        loop = asyncio.get_running_loop()

        def call(fn: Callable[[], _T]) -> Awaitable[_T]:
            return loop.run_in_executor(self._pool, fn)

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

    def _close(self) -> None:
        self._pool.shutdown(wait=True)  # let running transactions end first
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

    async def run(self, body: Callable[[Connection], _T], *, write: bool, durable: bool) -> _T:
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
