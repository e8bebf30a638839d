"""The SQL store's `load_slice`: a run of a session's entries, by position.

An entry's position is its ``seq`` less one, and ``seq`` has no gaps, so a
slice is one index range read per span of the session's lineage (a fork's
shared history included), whatever the session's length. Its length is
the last ``seq``, read in the same transaction; a slice running to the end
from a position before it learns the length from its own rows.

A slice of at most `QUICK_ROWS` entries (the last few, or those appended
since a reader's last look) is a quick read: on SQLite it runs on the event
loop, sparing the hop to a thread (see `Runner`); a longer one, found so,
is read again in a thread.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sessionstore.backends.records import decode_stored_entries
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import sealing
from sessionstore.backends.sql.contexts import QUICK_ROWS
from sessionstore.backends.sql.database import Database, find_session, last_seq
from sessionstore.backends.sql.engine import is_sqlite
from sessionstore.backends.sql.lineage import END, lineage
from sessionstore.backends.sql.runner import Kind
from sessionstore.store import EntrySlice

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

__all__ = ["load_slice"]


async def load_slice(
    database: Database, session_id: str, start: int, stop: int | None
) -> EntrySlice:
    """``load(session_id)[start:stop]``; see `SessionStore.load_slice`."""
    read = None
    given = partial(_read, session_id=session_id, start=start, stop=stop, sealer=database.sealer)
    if is_sqlite(database.runner.url) and _most(start, stop) <= QUICK_ROWS:
        read = await database.transaction(
            Kind.QUICK_READ, session_id, partial(given, most=QUICK_ROWS)
        )
    if read is None:
        read = await database.transaction(Kind.READ, session_id, given)
    assert read is not None
    first, length, rows = read
    entries = decode_stored_entries(session_id, rows, path=database.entries_at)
    return EntrySlice(entries, first, length)


def _most(start: int, stop: int | None) -> int | float:
    """The most entries the slice can hold, as far as its bounds tell."""
    if start < 0 and (stop is None or stop < 0):
        return -start if stop is None else max(0, stop - start)
    if start >= 0 and stop is not None and stop >= 0:
        return max(0, stop - start)
    return QUICK_ROWS  # unknown: tried quick, read again in a thread if longer


def _read(
    conn: Connection,
    *,
    session_id: str,
    start: int,
    stop: int | None,
    sealer: Sealer | None,
    most: int | None = None,
) -> tuple[int, int, list[Any]] | None:
    """The slice's first position, the session's length and the rows
    ``(seq, line)`` (opened, when sealed); with ``most``, None when there
    are more rows."""
    row = find_session(conn, session_id)
    spans = lineage(conn, session_id, row)
    if start >= 0 and stop is None:  # to the end: its rows give the length
        rows = _rows(conn, spans.within(start, END), most)
        if rows is None:
            return None
        if rows:
            first, length = start, start + len(rows)
        else:
            length = last_seq(conn, row)
            first = min(start, length)
    else:
        length = last_seq(conn, row)
        first, end, _ = slice(start, stop).indices(length)
        rows = _rows(conn, spans.within(first, end), most) if first < end else []
        if rows is None:
            return None
    if sealer is not None and rows:
        holder = sealing.holders(conn, session_id, spans)
        rows = list(sealing.open_lines(sealer, holder, rows, "entries", as_bytes=True))
    return first, length, rows


def _rows(conn: Connection, spans: Any, most: int | None) -> list[Any] | None:
    """`Q.LINES` over ``spans`` in order; with ``most``, None when there are more."""
    rows: list[Any] = []
    for pk, after, end in spans:
        if most is None:
            rows += Q.LINES.all(conn, pk=pk, after=after, end=end)
            continue
        found = Q.LINES.some(conn, most - len(rows), pk=pk, after=after, end=end)
        if found is None:
            return None
        rows += found
    return rows
