"""`SqlStore`: sessions in a SQL database (SQLite in WAL mode, or PostgreSQL).

Each transaction is a plain function of a SQLAlchemy ``Connection``, run by
a `Runner`: whole in a worker thread on SQLite, on the async engine on
PostgreSQL.

Every record is kept as its line, verbatim, in ``sessions.header`` or
``entries.line``; `load` decodes them. Entries carry ``seq`` = 1, 2, 3...
without gaps within their session, assigned inside the write transaction
that inserts them, so concurrent writers can neither collide nor skip.

Concurrency: within one store object, write transactions go through one
writer, one at a time. Across processes on SQLite, the write lock is taken
up front (``BEGIN IMMEDIATE``) and waited for up to the busy timeout; a
writer still locked out after that is retried a few times before the
caller sees a `StorageError`. On PostgreSQL, an append locks its session's
row (``SELECT ... FOR UPDATE``) before it reads the last ``seq``, a journal
write takes an advisory lock on the journal's name, and a transaction
failing on a serialization conflict or deadlock is run again. Reads never
wait for writers.

Durability: on SQLite, ``synchronous=NORMAL`` by default, so a committed
append survives a crash of the process; ``durability="full"`` makes it
survive a power loss too. On PostgreSQL every commit is durable.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from sessionstore import migrate
from sessionstore.backends._common import (
    StoreBase,
    decode_stored_entries,
    entry_lines,
    header_line,
    imported_entry,
    imported_header,
)
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import survey
from sessionstore.backends.sql.contexts import Contexts
from sessionstore.backends.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    Durability,
    describe,
    is_busy,
    open_runner,
)
from sessionstore.backends.sql.group import Append, GroupCommit
from sessionstore.backends.sql.journal import SqlJournal
from sessionstore.backends.sql.listing import Listing
from sessionstore.backends.sql.runner import Runner
from sessionstore.backends.sql.tables import journal_lines, sessions
from sessionstore.errors import (
    DuplicateSessionError,
    SessionConflictError,
    SessionNotFoundError,
    SessionStoreError,
    StorageError,
    validate_session_id,
)
from sessionstore.models import CompactionEntry, Message, SessionMeta
from sessionstore.store import Entry, SessionSummary

__all__ = ["SqlStore"]

_T = TypeVar("_T")
_BUSY_RETRIES = 5
_PAGE = 2000  # rows per query when streaming a session


class SqlStore(StoreBase):
    """Sessions in a SQL database; see `SessionStore` for the contract.

    Open one with `SqlStore.open` or `open_store("sqlite:///path.db")`.
    """

    def __init__(self, runner: Runner) -> None:
        """Wrap a runner made by `open`; use `open` instead."""
        self._runner = runner
        self._where = describe(runner.url)
        # Where a fault is, in an error: the table of headers, or of entries.
        self._headers_at, self._entries_at = f"{self._where} sessions", f"{self._where} entries"
        self._writer = asyncio.Lock()
        self._group = GroupCommit(self, self._write_appends)
        self._contexts = Contexts(self)
        self._listing = Listing(self)
        # What a transaction may raise: SQLAlchemy's errors, and the
        # driver's own from the statements run on its cursor (`queries`).
        driver = runner.sync_engine.dialect.loaded_dbapi
        self._errors = (SQLAlchemyError, OSError, driver.Error)

    def __repr__(self) -> str:
        return f"SqlStore({self._where!r})"

    @classmethod
    async def open(
        cls,
        target: str,
        *,
        durability: Durability = "normal",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> SqlStore:
        """Open the store in a database, creating its schema when it is empty.

        Args:
            target: ``sqlite:///path.db``, ``sqlite+aiosqlite:///path.db``, a
                path ending in ``.db``, ``.sqlite`` or ``.sqlite3``, or
                ``postgresql://...`` (with the ``postgres`` extra).
            durability: ``"normal"`` (a committed append survives a process
                crash) or ``"full"`` (it survives a power loss).
            busy_timeout: seconds a writer waits for another process's lock.

        Raises:
            ConfigurationError: the target or an option is not valid.
            SchemaOutdatedError: the schema is older; migrate it first.
            SchemaTooNewError: the schema comes from a newer sessionstore.
            StorageError: the database cannot be opened.
        """
        runner = open_runner(target, durability=durability, busy_timeout=busy_timeout)
        store = cls(runner)
        try:
            for write in (False, True):  # write-lock the database only to create it
                check = partial(migrate.ensure_schema, target=store._where, create=write)
                if not await store._transaction(None, check, write=write):
                    break
        except BaseException:
            await runner.dispose()
            raise
        return store

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._runner.dispose()

    def journal(self, name: str) -> SqlJournal:
        validate_session_id(name)
        self._check_open(name)
        return SqlJournal(self, name)

    async def journals(self) -> builtins.list[str]:
        self._check_open()

        def body(conn: Connection) -> builtins.list[str]:
            query = select(journal_lines.c.journal).distinct().order_by(journal_lines.c.journal)
            return builtins.list((conn.execute(query)).scalars())

        return await self._transaction(None, body)

    # ------------------------------------------------------------ plumbing

    async def _transaction(
        self,
        session_id: str | None,
        body: Callable[[Connection], _T],
        *,
        write: bool = False,
        durable: bool = False,
        lean: bool = False,
        quick: bool = False,
    ) -> _T:
        """Run ``body`` in one transaction; driver errors become ours.

        Args:
            write: take the write lock up front; one writer at a time.
            durable: commit with a full fsync even at ``durability="normal"``.
            lean: ``body`` runs `Query` statements alone (see `Runner.run`).
            quick: a lean read of a few rows through indexes (see `Runner.run`).
        """
        run = partial(self._runner.run, body, lean=lean or quick)
        attempt = 0
        while True:
            try:
                if not write:
                    return await run(write=False, durable=False, quick=quick)
                async with self._writer:
                    return await run(write=True, durable=durable)
            except SessionStoreError:
                raise
            except self._errors as exc:
                attempt += 1
                if is_busy(exc) and attempt <= _BUSY_RETRIES:
                    await asyncio.sleep(0.05 * 2**attempt)
                    continue
                raise self._storage_error(exc, session_id) from exc

    def _storage_error(self, exc: BaseException, session_id: str | None) -> StorageError:
        reason = getattr(exc, "orig", None) or exc
        return StorageError(f"{self._where}: {reason}", session_id=session_id)

    @staticmethod
    def _find(conn: Connection, session_id: str, *, lock: bool = False) -> Any:
        """The session's ``(pk, header)``; ``lock`` holds its row until commit."""
        query = Q.FIND_SESSION_LOCKED if lock else Q.FIND_SESSION
        found = query.first(conn, id=session_id)
        if found is None:
            raise SessionNotFoundError(session_id)
        return found

    @staticmethod
    def _last_seq(conn: Connection, pk: int) -> int:
        return int(Q.LAST_SEQ.scalar(conn, pk=pk))

    def _insert_session(self, conn: Connection, meta: SessionMeta, header: str) -> int:
        row = {
            "id": meta.id,
            "version": meta.version,
            "parent_session": meta.parent_session,
            "created_at": meta.created_at,
            "header": header,
        }
        try:
            inserted = conn.execute(insert(sessions).values(row).returning(sessions.c.pk))
        except IntegrityError:
            raise DuplicateSessionError(meta.id) from None
        return int(inserted.scalar_one())

    # ------------------------------------------------------------ the contract

    async def create(self, meta: SessionMeta) -> str:
        line = header_line(meta)
        self._check_open(meta.id)
        await self._transaction(
            meta.id, lambda conn: self._insert_session(conn, meta, line), write=True
        )
        return meta.id

    async def append_many(self, session_id: str, new: Sequence[Entry]) -> None:
        self._check(session_id)
        rows = [
            _row(entry, line) for entry, line in zip(new, entry_lines(session_id, new), strict=True)
        ]

        await self._group.submit(session_id, rows)

    def _write_appends(
        self, appends: Sequence[Append], conn: Connection
    ) -> builtins.list[SessionStoreError | None]:
        """Group commit's writer: each session looked up (and locked) once, in
        id order so that writers never wait on each other in a cycle, with
        its last ``seq``; then every row in one batch, each given the ``seq``
        after the one before in its session."""
        found: dict[str, tuple[int, int] | SessionStoreError] = {}
        for session_id in sorted({session_id for session_id, _ in appends}):
            try:
                pk = self._find(conn, session_id, lock=True)[0]
            except SessionNotFoundError as exc:
                found[session_id] = exc
            else:
                found[session_id] = pk, self._last_seq(conn, pk)
        batch = []
        for session_id, rows in appends:
            held = found[session_id]
            if isinstance(held, SessionStoreError):
                continue
            pk, last = held
            batch += [{**row, "session_pk": pk, "seq": last + n} for n, row in enumerate(rows, 1)]
            found[session_id] = pk, last + len(rows)
        if batch:
            Q.INSERT_ENTRIES.many(conn, batch)
        return [
            held if isinstance(held := found[session_id], SessionStoreError) else None
            for session_id, _ in appends
        ]

    def _locations(self, session_id: str) -> tuple[str, str]:
        return self._headers_at, self._entries_at

    async def _pages(self, session_id: str, page: Q.Query) -> AsyncIterator[builtins.list[Any]]:
        """The header line, then the entry lines in pages of `_PAGE` (``page``'s rows)."""
        self._check(session_id)

        def start(conn: Connection) -> tuple[int, str, int]:
            pk, header = self._find(conn, session_id)
            return pk, header, self._last_seq(conn, pk)

        pk, header, end = await self._transaction(session_id, start, lean=True)
        yield [header]
        done = 0
        while done < end:
            # Pages in their own short transactions: the log only grows, so
            # seq order makes them one consistent prefix of the session.
            read = partial(page.all, pk=pk, after=done, end=end, size=_PAGE)
            rows = await self._transaction(session_id, read, lean=True)
            done = rows[-1][0]
            yield builtins.list(map(itemgetter(1), rows))

    async def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        async for lines in self._pages(session_id, Q.PAGE):
            for line in lines:
                yield line

    async def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        pages = self._pages(session_id, Q.PAGE_BYTES)
        async for (header,) in pages:
            yield header.encode() + b"\n"
            break
        async for lines in pages:
            lines.append(b"")  # for the last newline
            yield b"\n".join(lines)

    async def import_session(
        self, header: str, lines: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        meta = imported_header(header)
        self._check(meta.id)

        try:
            async with self._writer, self._runner.steps(write=True) as step:
                if after is None:
                    pk = await step(lambda conn: self._insert_session(conn, meta, header))
                    count = 0
                else:
                    pk, count = await step(lambda conn: self._expect(conn, meta.id, header, after))
                batch: builtins.list[dict[str, Any]] = []
                async for line in lines:
                    count += 1
                    row = _row(imported_entry(line), line)
                    batch.append({**row, "session_pk": pk, "seq": count})
                    if len(batch) == _PAGE:
                        await step(partial(_insert_entries, rows=batch[:]))
                        batch.clear()
                if batch:
                    await step(partial(_insert_entries, rows=batch))
        except SessionStoreError:
            raise
        except self._errors as exc:
            raise self._storage_error(exc, meta.id) from exc
        return count - (after or 0)

    def _expect(
        self, conn: Connection, session_id: str, header: str, count: int
    ) -> tuple[int, int]:
        """The session's key, after checking its header line and entry count."""
        pk, stored = self._find(conn, session_id, lock=True)
        if stored != header:
            raise SessionConflictError(session_id, "the stored header line differs")
        held = self._last_seq(conn, pk)
        if held != count:
            raise SessionConflictError(session_id, f"holds {held} entries, not {count}")
        return pk, count

    async def load(self, session_id: str) -> builtins.list[Entry]:
        self._check(session_id)

        def body(conn: Connection) -> builtins.list[Entry]:
            # Decoded as the rows come, in the thread: the loop stays free,
            # and each row's line is dropped once decoded.
            pk, _ = self._find(conn, session_id)
            with contextlib.closing(Q.LINES.each(conn, pk=pk)) as rows:
                return decode_stored_entries(session_id, rows, path=self._entries_at)

        return await self._transaction(session_id, body, lean=True)

    async def list(self) -> builtins.list[SessionMeta]:
        """Every session's header, kept between calls (see `sql.listing`)."""
        self._check_open()
        return await self._listing.list()

    async def summaries(self) -> builtins.list[SessionSummary]:
        self._check_open()
        summaries = partial(survey.summaries, where=self._headers_at)
        return await self._transaction(None, summaries)

    async def integrity(self) -> builtins.list[str]:
        self._check_open()
        faults = partial(survey.faults, where=self._headers_at)
        return await self._transaction(None, faults)

    async def load_context(self, session_id: str) -> builtins.list[Message]:
        """The built context, read from the last compaction on, and kept.

        See `sessionstore.backends.sql.contexts`: the cost follows what the
        context holds, and, turn after turn, what was appended since.
        """
        self._check(session_id)
        return await self._contexts.load(session_id)


def _row(entry: Entry, line: str) -> dict[str, Any]:
    """The columns of an entry's row, but for its session and seq."""
    return {
        "entry_id": entry.id,
        "type": entry.type,
        "timestamp": entry.timestamp,
        "first_kept_id": entry.first_kept_id if isinstance(entry, CompactionEntry) else None,
        "line": line,
    }


def _insert_entries(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    Q.INSERT_ENTRIES.many(conn, rows)
