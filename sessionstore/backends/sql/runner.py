"""Where the SQL store's transactions run: one thread hop each.

A transaction, a plain function of a `Connection`, runs whole in a worker
thread on the blocking driver: one hop between the event loop and a
thread however many statements it holds (an async driver pays a hop per
statement). A result goes back to the loop that awaits it, so one store
serves any number of threads and event loops.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from sessionstore.backends.sql.engine import (
    WRITE,
    begin_on_driver,
    is_sqlite,
)
from sessionstore.backends.workers import Workers

_T = TypeVar("_T")

Step = Callable[[Callable[[Connection], _T]], Awaitable[_T]]


class Kind(enum.Enum):
    """What a transaction does, named at each call: how it runs follows."""

    READ = "read"
    """Reads what is committed: on SQLite one snapshot; on PostgreSQL each
    statement commits alone (at READ COMMITTED each takes its own snapshot
    anyway), sparing the BEGIN and COMMIT round trips."""

    LOCKED_READ = "locked read"
    """A read in one transaction everywhere, for a body that locks or sets
    its isolation (``REPEATABLE READ``): what it took holds to its end."""

    WRITE = "write"
    """Writes, one writer at a time (then ``BEGIN IMMEDIATE`` on SQLite); its
    commit survives a process crash, and a power loss at ``durability="full"``."""

    DURABLE_WRITE = "durable write"
    """A write whose commit survives a power loss at any durability."""

    @property
    def writes(self) -> bool:
        return self is not Kind.READ and self is not Kind.LOCKED_READ


def finish_on_driver(conn: Connection, body: Callable[[Connection], _T]) -> _T:
    """Run ``body`` in the transaction begun on the driver, and commit it there
    (SQLAlchemy's begin and commit cost as much again as a small transaction);
    a body's SQLAlchemy statement begins SQLAlchemy's own on top, which ends it."""
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
    driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.autocommit = True
    try:
        return finish_on_driver(conn, body)
    finally:
        if not driver.closed:
            driver.autocommit = False


class Runner:
    """Each transaction runs whole in a worker thread, never on an event loop
    (however small, its I/O can wait for milliseconds, and the loop with it).

    Writes run in one thread of their own, whose page cache then stays valid
    from one append to the next; reads in a few others, so that a long load
    never delays an append. Each thread keeps one connection for the store's
    life (a check-out of the pool costs as much as a small transaction).
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
        begin_on_driver(conn.connection, write=kind.writes, durable=kind is Kind.DURABLE_WRITE)
        return finish_on_driver(conn, body)

    async def run(self, body: Callable[[Connection], _T], kind: Kind) -> _T:
        workers = self._writer if kind.writes else self._readers
        return await workers.call(partial(self._in_transaction, body, kind))

    async def checkpoint(self) -> bool:
        """SQLite: ``wal_checkpoint(TRUNCATE)``, waiting up to the busy timeout
        for other readers; whether it completed (PostgreSQL: True)."""
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
        """The connections open now (for tools that watch them)."""
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
