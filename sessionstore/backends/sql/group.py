"""Writes to sessions: appends gathered into shared transactions (group
commit, docs/sql.md), and the bodies that create, fork and import sessions.

An append refused (an unknown session, a broken chain, a condition not
met) is its caller's alone; a driver error fails every caller of its
transaction. Appends gather per event loop; the loops take turns at the
database's writer lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sessionstore.backends.checks import check_head, check_last
from sessionstore.backends.sql import activity, sealing, wordindex
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import (
    Database,
    SessionRow,
    chain_end,
    chain_from,
    find_session,
    insert_session,
    last_entry_id,
)
from sessionstore.backends.sql.digests import entry_digest, header_digest
from sessionstore.backends.sql.lineage import branch
from sessionstore.backends.sql.runner import Kind
from sessionstore.errors import SessionConflictError, SessionNotFoundError, SessionStoreError
from sessionstore.models import CompactionEntry, SessionEntry, SessionMeta

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import DataKey, Sealer

# One caller's append: the session id, its entries' rows (`entry_row`), the
# id its last entry must have ("": none), the head that must name it (None:
# no condition, for either).
Append = tuple[str, Sequence[dict[str, Any]], str | None, str | None]


def write_appends(
    appends: Sequence[Append], conn: Connection, sealer: Sealer | None = None
) -> tuple[list[SessionStoreError | None], bool]:
    """Write appends in one transaction: each one's refusal, or None, and
    whether the word index has a backlog to catch up with (`wordindex.keep_up`).

    Sessions are locked once each in id order (PostgreSQL; on SQLite the
    writer lock holds them all, read in one statement), then heads in name
    order (as a move locks its session before its head), so writers never
    wait in a cycle; a condition is checked as the appends before it leave
    the session.
    """
    found: dict[str, _End | SessionStoreError] = {}
    ids = sorted({append[0] for append in appends})
    ends = _ends_at_once(conn, ids) if conn.dialect.name == "sqlite" and len(ids) > 1 else None
    for session_id in ids:
        try:
            if ends is None:
                session = find_session(conn, session_id, lock=True)
                seq, digest = chain_end(conn, session_id, session)
            elif (known := ends.get(session_id)) is None:
                raise SessionNotFoundError(session_id)
            else:
                session = known[0]
                seq, digest = chain_from(session_id, session, known[1])
            key = None if sealer is None else sealer.key_of(session.header, "header", session_id)
            found[session_id] = _End(session, seq, digest, key)
        except SessionStoreError as exc:  # no such session, or a broken chain
            found[session_id] = exc
    heads: dict[str, str | None] = {}
    for name in sorted({append[3] for append in appends if append[3] is not None}):
        if conn.dialect.name == "postgresql":
            Q.LOCK_HEAD.first(conn, name=name)
        last = Q.HEAD_LAST.first(conn, name=name)
        heads[name] = None if last is None else str(last[1])
    batch = []
    errors: list[SessionStoreError | None] = []
    written: dict[int, None] = {}  # the keys of the sessions written to, in order
    for session_id, rows, expect_last, expect_head in appends:
        end = found[session_id]
        try:
            if isinstance(end, SessionStoreError):
                raise end
            if expect_last is not None:
                check_last(session_id, expect_last, end.last_id(conn, session_id))
            if expect_head is not None:
                check_head(expect_head, session_id, heads[expect_head], by="append")
        except SessionStoreError as exc:
            errors.append(exc)
            continue
        errors.append(None)
        for row in rows:
            end.seq += 1
            if sealer is not None and end.key is not None:
                line = row["line"]
                sealed = sealer.seal_text(end.key, "entry", session_id, end.seq, line)
                row = {**row, "line": sealed, wordindex.TEXT: line}
            end.digest = entry_digest(end.digest, row)
            batch.append({**row, "session_pk": end.row.pk, "seq": end.seq, "digest": end.digest})
            written[end.row.pk] = None
            end.last = row["entry_id"]
    due = False
    if batch:
        Q.INSERT_ENTRIES.many(conn, batch)
        activity.touched(conn, written)
        due = wordindex.keep_up(conn, batch, sealer)
    return errors, due


# Each session's row (as `find_session` reads it) and its last own entry's
# seq and digest (as `chain_end` reads it; NULL: none).
_ENDS = (
    "SELECT s.id, s.pk, s.header, s.digest, s.base_pk, s.base_seq, e.seq, e.digest"
    " FROM sessions AS s LEFT JOIN entries AS e ON e.session_pk = s.pk"
    " AND e.seq = (SELECT max(seq) FROM entries WHERE session_pk = s.pk)"
    " WHERE s.id IN ({})"
)
_IDS_AT_ONCE = 500  # ids a statement binds at most (SQLite allows 32,766)


def _ends_at_once(
    conn: Connection, ids: Sequence[str]
) -> dict[str, tuple[SessionRow, tuple[int, bytes | None] | None]]:
    """SQLite: the sessions' rows and last entries in a statement per 500
    sessions, not two per session (each some 4 us of the writer's Python
    and driver work, with the GIL the event loop's thread waits for)."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        ends = {}
        for start in range(0, len(ids), _IDS_AT_ONCE):
            some = ids[start : start + _IDS_AT_ONCE]
            cursor.execute(_ENDS.format(", ".join("?" * len(some))), some)
            for row in cursor.fetchall():
                last = None if row[6] is None else (row[6], row[7])
                ends[row[0]] = (SessionRow(*row[1:6]), last)
        return ends
    finally:
        cursor.close()


@dataclass
class _End:
    """Where a session ends, as the appends of one transaction extend it."""

    row: SessionRow
    seq: int
    digest: bytes
    key: DataKey | None  # its data key, in a sealed store
    last: str | None = None  # its last entry's id, once read or written

    def last_id(self, conn: Connection, session_id: str) -> str:
        """The id of the last entry (``""`` for none), read only when asked."""
        if self.last is None:
            self.last = last_entry_id(conn, session_id, self.row, self.seq)
        return self.last


class GroupCommit:
    """Gathers the appends to one database into shared transactions, per event loop."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopGroup] = (
            weakref.WeakKeyDictionary()
        )
        self._guard = threading.Lock()

    async def submit(self, append: Append) -> None:
        """Write ``append`` in the next shared transaction; return once it committed."""
        loop = asyncio.get_running_loop()
        group = self._loops.get(loop)
        if group is None:
            with self._guard:
                group = self._loops.setdefault(loop, _LoopGroup(self._database))
        await group.submit(append)


class _LoopGroup:
    """The appends of one event loop: one transaction at a time, the rest gathering."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._pending: list[tuple[Append, asyncio.Future[None]]] = []
        self._busy = False  # a transaction of appends is running
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, append: Append) -> None:
        # With no transaction of appends running, the caller runs its own at
        # once (no task to start first); appends arriving meanwhile gather.
        if self._busy:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._pending.append((append, future))
            await future
            return
        self._busy = True
        try:
            write = partial(write_appends, [append], sealer=self._database.sealer)
            (error,), due = await self._database.transaction(Kind.WRITE, None, write)
            if due:
                await self._catch_up()
        finally:
            if self._pending:
                self._flushing = asyncio.create_task(self._flush())
            else:
                self._busy = False
        if error is not None:
            raise error

    async def _flush(self) -> None:
        try:
            await self._flush_pending()
        finally:
            self._busy = False

    async def _flush_pending(self) -> None:
        while self._pending:
            jobs, self._pending = self._pending, []
            appends = [append for append, _ in jobs]
            try:
                errors, due = await self._database.transaction(
                    Kind.WRITE, None, partial(write_appends, appends, sealer=self._database.sealer)
                )
            except BaseException as exc:
                for _, future in jobs:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for (_, future), error in zip(jobs, errors, strict=True):
                if future.done():
                    continue  # its caller gave up waiting; the append stands
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
            if due:  # while appends gather for the next transaction
                await self._catch_up()

    async def _catch_up(self) -> None:
        # SQLite: the backlog indexed in a transaction of its own. The appends
        # stand either way: a failure is left to the next write, and a search
        # reads the backlog meanwhile.
        with contextlib.suppress(SessionStoreError):
            body = partial(wordindex.catch_up, sealer=self._database.sealer)
            await self._database.transaction(Kind.WRITE, None, body)


def new_session(
    conn: Connection,
    *,
    meta: SessionMeta,
    header: str,
    sealer: Sealer | None,
    source_id: str | None = None,
    at: str | None = None,
) -> None:
    """Insert a session's row (a fork of ``source_id`` when given, `branch`)
    and list it; sealed, under a new data key."""
    with sealing.new_header(sealer, meta.id, header) as (stored, _):
        if source_id is None:
            pk = insert_session(conn, meta, stored)
        else:
            pk = branch(conn, source_id=source_id, at=at, meta=meta, header=stored)
    activity.listed(conn, pk=pk, meta=sealing.listed_meta(sealer, meta))


def imported_session(
    conn: Connection, *, meta: SessionMeta, header: str, sealer: Sealer | None
) -> tuple[int, bytes, DataKey | None]:
    """Insert an imported session's row (not listed yet): its key, the
    digest its chain starts from, and its data key when sealed."""
    with sealing.new_header(sealer, meta.id, header) as (stored, key):
        return insert_session(conn, meta, stored), header_digest(stored), key


def entry_row(entry: SessionEntry, line: str) -> dict[str, Any]:
    """The columns of an entry's row, but for its session, seq and digest."""
    return {
        "entry_id": entry.id,
        "type": entry.type,
        "timestamp": entry.timestamp,
        "first_kept_id": entry.first_kept_id if isinstance(entry, CompactionEntry) else None,
        "line": line,
    }


def expect_import(
    conn: Connection, *, session_id: str, header: str, count: int, sealer: Sealer | None
) -> tuple[int, int, bytes, DataKey | None]:
    """The session's key, count and digest to chain from, and its data key
    when sealed, after checking its header line and entry count."""
    row = find_session(conn, session_id, lock=True)
    if sealing.open_header(sealer, session_id, row.header, "sessions") != header:
        raise SessionConflictError(session_id, "the stored header line differs")
    held, digest = chain_end(conn, session_id, row)
    if held != count:
        raise SessionConflictError(session_id, f"holds {held} entries, not {count}")
    key = None if sealer is None else sealer.key_of(row.header, "header", session_id)
    return row.pk, count, digest, key
