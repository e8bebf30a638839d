"""`Database`: one SQL database as the store's parts use it: its `Runner`,
one writer at a time, the retries of a writer locked out by another
process, and the one place where driver errors become ours. The helpers
take a `Database`, never the store, and write transaction bodies: plain
functions of a ``Connection``, using the row lookups below.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from sessionstore.backends.checks import Durability
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.digests import fork_digest, header_digest
from sessionstore.backends.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    describe,
    is_busy,
    open_sync_engine,
)
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind, Runner, Step
from sessionstore.backends.sql.schema import ensure_schema
from sessionstore.errors import (
    ClosedError,
    CorruptSessionError,
    DuplicateSessionError,
    SessionNotFoundError,
    SessionStoreError,
    StorageError,
)
from sessionstore.models import SessionMeta

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

__all__ = ["Database", "Kind"]

_T = TypeVar("_T")
_BUSY_RETRIES = 5


class WriterLock:
    """One writer at a time, across every thread and event loop using a store.

    Waiters queue in arrival order, whatever their loop; releasing hands the
    lock straight to the first (through its loop), so it is never free while
    anyone waits, and a waiter cancelled as its turn came passes it on.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        with self._guard:
            waiter = None
            if self._held:
                waiter = loop.create_future()
                self._waiters.append((loop, waiter))
            self._held = True
        if waiter is not None:
            try:
                await waiter
            except BaseException:
                self._give_up(loop, waiter)
                raise
        try:
            yield
        finally:
            self._release()

    def _give_up(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
        with self._guard:
            if (loop, waiter) in self._waiters:
                self._waiters.remove((loop, waiter))
                return
        if waiter.done() and not waiter.cancelled():
            self._release()  # handed over, then cancelled: pass it on
        # Otherwise the hand-over is on its way, and `_grant` passes it on.

    def _release(self) -> None:
        with self._guard:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._grant, waiter)
                except RuntimeError:  # its loop is closed: nobody to hand it to
                    continue
                return
            self._held = False

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        """On the waiter's loop: its turn, unless it was cancelled meanwhile."""
        if waiter.cancelled():
            self._release()
        else:
            waiter.set_result(None)


class Database:
    """Transactions on one database, their errors translated; open one with `open`.

    Attributes:
        where: the database, fit for messages (no password).
        target: the database as ``sessionstore --db`` takes it: a SQLite
            file's path, else its URL without the password (which the
            driver finds as for any connection: ``PGPASSWORD``, ``~/.pgpass``).
        headers_at: where headers are kept, as an error names it.
        entries_at: where entries are kept, likewise.
    """

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.where = describe(runner.url)
        url = runner.url
        sqlite_file = url.get_backend_name() == "sqlite" and url.database
        self.target = sqlite_file or url.set(password=None).render_as_string(hide_password=False)
        self.headers_at = f"{self.where} sessions"
        self.entries_at = f"{self.where} entries"
        self._writer = WriterLock()
        self._closed = False
        self.sealer: Sealer | None = None
        """What seals the store's records, when it is encrypted (`sealing.start`)."""
        # What a transaction may raise: SQLAlchemy's errors, and the
        # driver's own from the statements run on its cursor (`queries`).
        driver = runner.sync_engine.dialect.loaded_dbapi
        self._errors = (SQLAlchemyError, OSError, driver.Error)

    @classmethod
    async def open(
        cls,
        target: str,
        *,
        durability: Durability = "normal",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        check_schema: bool = True,
    ) -> Database:
        """Open a database; with ``check_schema``, create the schema when it
        is empty and refuse one of another revision (`ensure_schema`)."""
        engine = open_sync_engine(
            target, durability=durability, busy_timeout=busy_timeout, pooled=True
        )
        database = cls(Runner(engine))
        try:
            for kind in (Kind.READ, Kind.WRITE) if check_schema else ():
                # The write lock is taken only to create the schema.
                check = partial(ensure_schema, target=database.where, create=kind.writes)
                if not await database.transaction(kind, None, check):
                    break
        except BaseException:
            await database.close()
            raise
        return database

    def check_open(self, session_id: str | None = None) -> None:
        if self._closed:
            raise ClosedError("SqlStore is closed", session_id=session_id)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._runner.dispose()
            if self.sealer is not None:
                self.sealer.keyring.close()

    async def transaction(
        self, kind: Kind, session_id: str | None, body: Callable[[Connection], _T]
    ) -> _T:
        """Run ``body`` in one transaction of ``kind`` and commit it; a writer
        locked out by another process is tried again. It raises what ``body``
        raised, or a `StorageError` (naming ``session_id``) for a driver or OS error."""
        attempt = 0
        while True:
            try:
                if not kind.writes:
                    return await self._runner.run(body, kind)
                async with self._writer.held():
                    return await self._runner.run(body, kind)
            except SessionStoreError:
                raise
            except self._errors as exc:
                attempt += 1
                if is_busy(exc) and attempt <= _BUSY_RETRIES:
                    await asyncio.sleep(0.05 * 2**attempt)
                    continue
                raise self._translated(exc, session_id) from exc

    async def erase(self, session_id: str | None, body: Callable[[Connection], _T]) -> _T:
        """Run an erasing ``body`` in a durable write, then on SQLite checkpoint
        the WAL away, so the deleted bytes (zeroed by ``secure_delete``) are
        nowhere; a checkpoint another process's reader holds off is left to the next."""
        result = await self.transaction(Kind.DURABLE_WRITE, session_id, body)
        try:
            async with self._writer.held():
                await self._runner.checkpoint()
        except self._errors as exc:
            raise self._translated(exc, session_id) from exc
        return result

    @asynccontextmanager
    async def steps(self, session_id: str | None) -> AsyncIterator[Step[Any]]:
        """A write transaction in several steps, for a body that awaits between
        statements (an import): ``step(body)`` runs one; all commit, or none."""
        try:
            async with self._writer.held(), self._runner.steps() as step:
                yield step
        except SessionStoreError:
            raise
        except self._errors as exc:
            raise self._translated(exc, session_id) from exc

    def _translated(self, exc: BaseException, session_id: str | None) -> SessionStoreError:
        """Ours, for a driver or OS error: a stored text that is not UTF-8 is
        corrupt data (named without quoting it), anything else a `StorageError`."""
        reason = getattr(exc, "orig", None) or exc
        if "could not decode to utf-8" in str(reason).lower():
            what = "a stored text is not valid UTF-8 (`sessionstore verify` names the row)"
            if session_id is not None:
                return CorruptSessionError(session_id, what, path=self.where)
            return StorageError(f"{self.where}: {what}")
        return StorageError(f"{self.where}: {reason}", session_id=session_id)

    @property
    def runner(self) -> Runner:
        return self._runner


# ---------------------------------------------------------------- row lookups


class SessionRow(NamedTuple):
    """A session's row: for a fork, its base and how many entries it shares (`lineage`)."""

    pk: int
    header: str
    digest: bytes | None
    base_pk: int | None
    base_seq: int | None


_FIND: dict[bool | str, Query] = {
    False: Q.FIND_SESSION,
    True: Q.FIND_SESSION_LOCKED,
    "erase": Q.FIND_SESSION_ERASED,
}


def find_session(
    conn: Connection, session_id: str, *, lock: bool | Literal["erase"] = False
) -> SessionRow:
    """The session's row; ``lock`` holds it until commit (PostgreSQL), against
    appends (``True``) or against forks too (``"erase"``)."""
    query = _FIND[lock]
    found = query.first(conn, id=session_id)
    if found is None:
        raise SessionNotFoundError(session_id)
    return SessionRow(*found)


def session_id(conn: Connection, pk: int) -> str:
    """The id of the session of key ``pk`` (``#pk`` if there is none)."""
    found = Q.SESSION_ID.first(conn, pk=pk)
    return f"#{pk}" if found is None else str(found[0])


def last_seq(conn: Connection, row: SessionRow) -> int:
    """The last ``seq`` of a session's history, a fork's shared ones too."""
    return int(Q.LAST_SEQ.scalar(conn, pk=row.pk)) or (row.base_seq or 0)


def chain_end(conn: Connection, session_id: str, row: SessionRow) -> tuple[int, bytes]:
    """A session's last ``seq`` and the digest its next entry chains from."""
    return chain_from(session_id, row, Q.LAST_ENTRY.first(conn, pk=row.pk))


def chain_from(
    session_id: str, row: SessionRow, last: tuple[int, bytes | None] | None
) -> tuple[int, bytes]:
    """`chain_end` of a session whose last own entry's ``(seq, digest)`` is
    ``last`` (None: it has none)."""
    seq, digest = (row.base_seq or 0, row.digest) if last is None else last
    if digest is None:
        what = "its header" if last is None else f"entry {seq}"
        raise CorruptSessionError(session_id, f"{what} has no digest to chain from")
    return seq, bytes(digest)


def last_entry_id(conn: Connection, session_id: str, row: SessionRow, seq: int) -> str:
    """The id of a session's last entry ``seq`` (`chain_end`'s), ``""`` for
    none; a fork holding no row of its own ends in its base's."""
    if seq == 0:
        return ""
    holder = row.pk if seq > (row.base_seq or 0) else row.base_pk
    found = Q.ENTRY_ID_AT.first(conn, pk=holder, seq=seq)
    if found is None:
        raise CorruptSessionError(session_id, f"entry {seq} is missing")
    return str(found[0])


def insert_session(
    conn: Connection,
    meta: SessionMeta,
    header: str | bytes,
    *,
    base: tuple[int, int, bytes] | None = None,
) -> int:
    """Insert a session's row (``header`` as stored); its key. ``base``: a
    fork's base key, how many entries it shares and the last one's digest."""
    base_pk, base_seq, digest = (None, None, header_digest(header))
    if base is not None:
        base_pk, base_seq = base[0], base[1]
        digest = fork_digest(header, base_seq, base[2])
    row = {
        "id": meta.id,
        "version": meta.version,
        "parent_session": meta.parent_session,
        "created_at": meta.created_at,
        "header": header,
        "digest": digest,
        "base_pk": base_pk,
        "base_seq": base_seq,
    }
    try:
        return int(Q.INSERT_SESSION.scalar(conn, **row))
    except conn.dialect.loaded_dbapi.IntegrityError as exc:
        # The id taken: a unique violation, or on SQLite the trigger refusing
        # an insert that meets a row. Anything else (a base gone) is the
        # error boundary's to name.
        if not any(sign in str(exc).lower() for sign in ("unique", "append-only")):
            raise
        raise DuplicateSessionError(meta.id) from None
