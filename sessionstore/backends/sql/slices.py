"""The SQL store's `load_slice`: an index range read per span of the
session's lineage (``seq`` is the position plus one, without gaps).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sessionstore.backends.checks import check_head
from sessionstore.backends.records import decode_stored_entries
from sessionstore.backends.sql import heads, sealing
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import Database, find_session, last_seq
from sessionstore.backends.sql.lineage import END, lineage
from sessionstore.backends.sql.runner import Kind
from sessionstore.store import EntrySlice

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer


async def load_slice(
    database: Database, session_id: str, start: int, stop: int | None, expect_head: str | None
) -> EntrySlice:
    given = partial(
        _read,
        session_id=session_id,
        start=start,
        stop=stop,
        expect_head=expect_head,
        sealer=database.sealer,
    )
    first, length, rows = await database.transaction(Kind.READ, session_id, given)
    entries = decode_stored_entries(session_id, rows, path=database.entries_at)
    return EntrySlice(entries, first, length)


def _read(
    conn: Connection,
    *,
    session_id: str,
    start: int,
    stop: int | None,
    expect_head: str | None,
    sealer: Sealer | None,
) -> tuple[int, int, list[Any]]:
    if expect_head is not None:  # in the read's snapshot
        now = heads.head(conn, name=expect_head, sealer=sealer)
        check_head(expect_head, session_id, now, by="read")
    row = find_session(conn, session_id)
    spans = lineage(conn, session_id, row)
    if start >= 0 and stop is None:  # to the end: its rows give the length
        rows = _rows(conn, spans.within(start, END))
        if rows:
            first, length = start, start + len(rows)
        else:
            length = last_seq(conn, row)
            first = min(start, length)
    else:
        length = last_seq(conn, row)
        first, end, _ = slice(start, stop).indices(length)
        rows = _rows(conn, spans.within(first, end)) if first < end else []
    if sealer is not None and rows:
        holder = sealing.holders(conn, session_id, spans)
        rows = list(sealing.open_lines(sealer, holder, rows, "entries", as_bytes=True))
    return first, length, rows


def _rows(conn: Connection, spans: Any) -> list[Any]:
    return [
        row for pk, after, end in spans for row in Q.LINES.all(conn, pk=pk, after=after, end=end)
    ]
