"""The SQL store's `list`: every session's header, kept between calls.

Between erasures sessions are only added: a call reads the session count
and, when it grew, the headers past the last ``pk`` held (all of them when
they fall short: PostgreSQL commits out of ``pk`` order). An erasure
changes `Q.ERASURE_MARK`, read first: every header is read again. Up to
`HEADERS_CACHED` are kept.
"""

from __future__ import annotations

import builtins
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sessionstore.backends.records import decode_stored_meta
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import Database
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.sealing import open_header
from sessionstore.errors import CorruptSessionError, InvalidRecordError
from sessionstore.models import SessionMeta
from sessionstore.wire.stored import read_stored_meta

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

logger = logging.getLogger("sessionstore")

HEADERS_CACHED = 1 << 15


def _read(
    conn: Connection, *, held: int, after: int, erased: int
) -> tuple[int, int, list[Any] | None]:
    """The newest erasure, the count, and the rows ``(pk, header, id)`` past
    ``after`` if it grew (every row when the erasure is not ``erased``)."""
    now = int(Q.ERASURE_MARK.scalar(conn))
    count = int(Q.SESSION_COUNT.scalar(conn))
    if now != erased:
        return now, count, Q.HEADERS_AFTER.all(conn, after=0)
    return now, count, None if count == held else Q.HEADERS_AFTER.all(conn, after=after)


def _opened(sealer: Sealer, row: Any, where: str) -> tuple[int, str, str] | None:
    """A sealed row, its header opened; None (logged) when it does not open."""
    pk, header, session_id = row
    try:
        return pk, open_header(sealer, session_id, header, where), session_id
    except CorruptSessionError as exc:
        logger.warning("skipping %s", exc)
        return None


class Listing:
    def __init__(self, database: Database) -> None:
        self._database = database
        self._metas: tuple[SessionMeta, ...] = ()
        self._last = 0  # the greatest pk among them
        self._erased = 0  # the newest erasure when they were read

    async def list(self) -> builtins.list[SessionMeta]:
        held, last, erased = self._metas, self._last, self._erased
        transaction = self._database.transaction
        read = partial(_read, held=len(held), after=last, erased=erased)
        erased_now, count, rows = await transaction(Kind.READ, None, read)
        if erased_now != erased:  # some session may be gone: `_read` read them all
            held, last = (), 0
        if rows is None:
            return builtins.list(held)
        if len(held) + len(rows) != count:  # one committed late: read them all
            read_all = partial(Q.HEADERS_AFTER.all, after=0)
            held, rows = (), await transaction(Kind.READ, None, read_all)
        metas = held + tuple(await self._decode(rows))
        # Between erasures sessions only grow in number: of two calls, keep
        # what the later saw.
        later = (erased_now, len(metas)) >= (self._erased, len(self._metas))
        if later and len(metas) <= HEADERS_CACHED:
            self._metas, self._last = metas, rows[-1][0] if rows else last
            self._erased = erased_now
        return builtins.list(metas)

    async def _decode(self, rows: builtins.list[Any]) -> builtins.list[SessionMeta]:
        sealer, where = self._database.sealer, self._database.headers_at
        if sealer is not None:  # a header that does not open is skipped, named
            rows = [opened for row in rows if (opened := _opened(sealer, row, where)) is not None]
        try:
            return [read_stored_meta(header) for _, header, _ in rows]
        except InvalidRecordError:
            pass
        # A header that does not decode: name its session.
        for _, header, session_id in rows:
            decode_stored_meta(session_id, header, path=where, line_no=1)
        raise AssertionError("a header failed to decode, then decoded")  # pragma: no cover

    def clear(self) -> None:
        self._metas, self._last, self._erased = (), 0, 0
