"""The SQL store's `list`: every session's header, kept between calls.

Sessions are only ever added: the schema refuses UPDATE and DELETE, so a
session listed once is still there, its header unchanged, and how many
sessions the database holds tells whether any was created since. Asked
again, `list` reads that count and, when it grew, the headers of the
sessions whose ``pk`` comes after the last one it holds. On PostgreSQL a
session can commit after another with a greater ``pk``; when the headers
read then fall short of the count, every header is read again. On SQLite
the count and the headers are read in one transaction, one snapshot.

Up to `HEADERS_KEPT` sessions are kept (a few hundred bytes each); a
database holding more is read whole on every call.
"""

from __future__ import annotations

import builtins
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sessionstore.backends._common import (
    HEADERS_KEPT,
    decode_stored_meta,
    gc_paused,
    stored_header,
)
from sessionstore.backends.sql import queries as Q
from sessionstore.errors import InvalidRecordError
from sessionstore.models import SessionMeta

if TYPE_CHECKING:
    from sessionstore.backends.sql.store import SqlStore

__all__ = ["Listing"]


def _read(conn: Connection, *, held: int, after: int) -> tuple[int, list[Any] | None]:
    """The session count, and the ``(pk, header)`` rows after ``after`` if it grew."""
    count = int(Q.SESSION_COUNT.scalar(conn))
    return count, None if count == held else Q.HEADERS_AFTER.all(conn, after=after)


class Listing:
    """Lists the sessions of one `SqlStore`, keeping what it decoded."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self._metas: tuple[SessionMeta, ...] = ()
        self._last = 0  # the greatest pk among them

    async def list(self) -> builtins.list[SessionMeta]:
        held, last = self._metas, self._last
        transaction = self._store._transaction
        read = partial(_read, held=len(held), after=last)
        count, rows = await transaction(None, read, lean=True)
        if rows is None:
            return builtins.list(held)
        if len(held) + len(rows) != count:  # one committed late: read them all
            read_all = partial(Q.HEADERS_AFTER.all, after=0)
            held, rows = (), await transaction(None, read_all, lean=True)
        metas = held + tuple(await self._decode(rows))
        # Sessions only grow in number: of two calls, keep what the later saw.
        if len(self._metas) <= len(metas) <= HEADERS_KEPT:
            self._metas, self._last = metas, rows[-1][0] if rows else last
        return builtins.list(metas)

    async def _decode(self, rows: builtins.list[Any]) -> builtins.list[SessionMeta]:
        try:
            with gc_paused():  # a first list builds a model per session
                return [stored_header(header) for _, header in rows]
        except InvalidRecordError:
            pass
        # A header that does not decode: name its session.
        for session_id, header in await self._store._transaction(None, Q.SESSIONS.all):
            decode_stored_meta(session_id, header, path=self._store._headers_at, line_no=1)
        raise AssertionError("a header failed to decode, then decoded")  # pragma: no cover

    def forget(self) -> None:
        """Drop what is kept (the next call reads every header)."""
        self._metas, self._last = (), 0
