"""Group commit: appends that arrive together commit in one transaction.

Each caller of `GroupCommit.submit` still awaits its own durable commit:
its future resolves only once the transaction holding its append has
committed. While one transaction is committing, new appends gather; the
next transaction takes all of them, and writes them together: one lookup
per session, then every row in one batch, in the order the appends came
(each row's ``seq`` follows the row before it in its session, so a
caller's batch stays contiguous).

An append to an unknown session (or to one whose chain of digests is
broken) is refused before anything is written:
that refusal is its caller's alone, and the others commit. Anything else
that fails (a driver error) fails the whole transaction, and every caller
in it.

Appends gather per event loop: callers awaiting on one loop share its
transactions, and the transactions of several loops (one store used from
many threads) take turns at the database's writer lock.
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
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import wordindex
from sessionstore.backends.sql.activity import touched
from sessionstore.backends.sql.database import (
    Database,
    SessionRow,
    chain_end,
    find_session,
    last_entry_id,
)
from sessionstore.backends.sql.digests import entry_digest
from sessionstore.backends.sql.runner import Kind
from sessionstore.errors import SessionStoreError

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import DataKey, Sealer

__all__ = ["Append", "GroupCommit", "write_appends"]

Append = tuple[str, Sequence[dict[str, Any]], str | None, str | None]
"""One caller's append: the session id, its entries' rows (no key, no seq),
the id its last entry must have (``""``: none; None: no condition), and the
head that must name it (None: no condition)."""


def write_appends(
    appends: Sequence[Append], conn: Connection, sealer: Sealer | None = None
) -> tuple[list[SessionStoreError | None], bool]:
    """Write appends in one transaction: each one's refusal, or None, and
    whether the word index has a backlog to catch up with (`wordindex.keep_up`).

    Each session is looked up (and locked) once, in id order so that
    writers never wait on each other in a cycle, with its last ``seq`` and
    digest; then every row goes in one batch, each given the ``seq`` after
    the one before in its session, and its digest chained from it; then
    one activity per session written to (`activity.touched`). A
    conditional append is checked against its session's last entry as the
    appends before it in the batch leave it (`check_last`), and against
    where its head stands (`check_head`; on PostgreSQL the heads are locked
    after the sessions, in name order, as a move locks its session before
    its head): refused, it writes nothing, and the others go on.
    """
    found: dict[str, _End | SessionStoreError] = {}
    for session_id in sorted({append[0] for append in appends}):
        try:
            session = find_session(conn, session_id, lock=True)
            seq, digest = chain_end(conn, session_id, session)
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
        touched(conn, written)
        due = wordindex.keep_up(conn, batch, sealer)
    return errors, due


@dataclass
class _End:
    """Where a session ends, as the appends of one transaction extend it."""

    row: SessionRow
    seq: int
    digest: bytes
    key: DataKey | None  # its data key, in a sealed store
    last: str | None = None  # its last entry's id, once read or written

    def last_id(self, conn: Connection, session_id: str) -> str:
        """The id of the last entry (``""`` for none), read only when asked:
        a fork that holds no row of its own ends in its base's row.

        Raises:
            CorruptSessionError: that row is missing.
        """
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
        """Write ``append`` in the next shared transaction; return once it committed.

        With no transaction of appends running, the caller runs its own
        at once (no task to start first); appends arriving meanwhile
        gather, and one task then commits them together.
        """
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
        """SQLite: index the word index's backlog, in a transaction of its own
        run by the writer thread (`wordindex.catch_up`). The appends stand
        either way: one that fails is left to the next write, and a search
        reads the backlog meanwhile."""
        with contextlib.suppress(SessionStoreError):
            body = partial(wordindex.catch_up, sealer=self._database.sealer)
            await self._database.transaction(Kind.WRITE, None, body)
