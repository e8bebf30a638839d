"""Erasing a session or journal: transaction bodies, and the record kept.

An erase is one write transaction: the session's row is locked (on
PostgreSQL ``FOR UPDATE``, which appends and forks wait for; SQLite has one
writer at a time), refused while forks share its rows, the digest of its
bytes computed as `raw_blocks` gives them (the rows streamed, never held
together), the `Erasure` inserted, then its titles, activity and listing
rows, its rows in the word index (`wordindex.forget`), its entries and its
row deleted. The DELETE triggers let those rows go only because the erasure
was written in the same transaction (migration 0004): on SQLite the erase
names it in the table ``erasing`` meanwhile, and takes it out before the
commit. The database refuses a transaction whose erasure leaves any of the
session (or journal) behind, and on SQLite an erasure named a second
time (migration 0007).

An append waiting on the lock then finds no session: it lands before the
erase, and is erased with it, or fails with `SessionNotFoundError`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import closing

from sqlalchemy import Connection, bindparam, delete, func, insert, select

from sessionstore.backends.checks import check_unchanged
from sessionstore.backends.records import erasure_of
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import wordindex
from sessionstore.backends.sql.database import SessionRow, last_seq
from sessionstore.backends.sql.lineage import END, lineage, lines
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import activity, listing, spent_ticks, titles
from sessionstore.errors import SessionConflictError, SessionNotFoundError
from sessionstore.models import Erasure

__all__ = ["erase_journal", "erase_session", "erasures"]

# What is kept beside a session's log (``pk``): its rows go before its own.
_DELETE_BESIDE = [
    Query(delete(table).where(table.c.session_pk == bindparam("pk")))
    for table in (titles, listing, activity)
]
# SQLite: the session's last tick, kept when no tick kept is greater, so
# that no later write takes it again (see `activity.NextTick`).
_SPEND_TICK = Query(
    insert(spent_ticks).from_select(
        ["tick"],
        select(listing.c.tick).where(
            listing.c.session_pk == bindparam("pk"),
            listing.c.tick
            > select(func.coalesce(func.max(spent_ticks.c.tick), 0)).scalar_subquery(),
        ),
    )
)


def erase_session(
    conn: Connection, *, session_id: str, reason: str, digest: str | None = None
) -> Erasure:
    """Erase ``session_id`` whole and record it (a write transaction's body).

    Raises:
        SessionNotFoundError: no such session.
        SessionConflictError: forks share its rows (named).
    """
    row = _locked(conn, session_id)
    forks = [fork for (fork,) in Q.FORKS_OF.all(conn, pk=row.pk)]
    if forks:
        raise SessionConflictError(
            session_id, f"forks share its entries: {', '.join(forks)}; erase them first"
        )
    blocks = _session_bytes(conn, session_id, row)
    record = erasure_of("session", session_id, reason, blocks, last_seq(conn, row))
    check_unchanged(record, digest)
    seq = _record(conn, record)
    if conn.dialect.name == "sqlite":
        _SPEND_TICK.many(conn, [{"pk": row.pk}])
    for rows in _DELETE_BESIDE:
        rows.many(conn, [{"pk": row.pk}])
    with closing(Q.LINES.each(conn, pk=row.pk, after=row.base_seq or 0, end=END)) as own:
        wordindex.forget(conn, row.pk, (line for _, line in own))
    Q.DELETE_ENTRIES.many(conn, [{"pk": row.pk}])
    Q.DELETE_SESSION.many(conn, [{"pk": row.pk}])
    wordindex.lower_mark(conn)
    _done(conn, seq)
    return record


def erase_journal(conn: Connection, *, name: str, reason: str) -> Erasure | None:
    """Erase the journal ``name`` whole, its history included, and record it;
    None when it holds no row at all (a write transaction's body)."""
    if conn.dialect.name == "postgresql":
        Q.LOCK_JOURNAL.first(conn, name=name)
    if Q.JOURNAL_LAST_ROW.first(conn, name=name) is None:
        return None
    count = 0

    def blocks() -> Iterator[bytes]:
        nonlocal count
        for (line,) in Q.JOURNAL_HISTORY.each(conn, name=name):
            count += 1
            yield bytes(line) + b"\n"

    digested = erasure_of("journal", name, reason, blocks(), 0)
    record = digested.model_copy(update={"lines": count})
    seq = _record(conn, record)
    Q.DELETE_JOURNAL.many(conn, [{"name": name}])
    _done(conn, seq)
    return record


def erasures(conn: Connection) -> builtins.list[Erasure]:
    """Every erasure record, oldest first."""
    fields = ("kind", "name", "at", "reason", "lines", "digest")
    return [Erasure(**dict(zip(fields, row, strict=True))) for row in Q.ERASURES.all(conn)]


def _locked(conn: Connection, session_id: str) -> SessionRow:
    found = Q.FIND_SESSION_ERASED.first(conn, id=session_id)
    if found is None:
        raise SessionNotFoundError(session_id)
    return SessionRow(*found)


def _session_bytes(conn: Connection, session_id: str, row: SessionRow) -> Iterator[bytes]:
    """The session's file as `raw_blocks` gives it, a line at a time: its
    header, then every entry of its history, those a base holds included."""
    yield row.header.encode() + b"\n"
    rows = lines(conn, lineage(conn, session_id, row), 0, END)
    try:
        for _, line in rows:
            yield bytes(line) + b"\n"
    finally:
        rows.close()


def _record(conn: Connection, record: Erasure) -> int:
    """Insert the record, and return its ``seq``; on SQLite, name it as the
    erasure under way."""
    seq: int = Q.INSERT_ERASURE.scalar(conn, **record.model_dump())
    if conn.dialect.name == "sqlite":
        Q.INSERT_ERASING.many(conn, [{"erasure": seq}])
    return seq


def _done(conn: Connection, seq: int) -> None:
    """SQLite: the erasure ``seq`` is no longer under way once this
    transaction commits (the triggers let it go only once all it names is
    gone, and never let it be named again, migration 0007)."""
    if conn.dialect.name == "sqlite":
        Q.CLOSE_ERASING.many(conn, [{"erasure": seq}])
