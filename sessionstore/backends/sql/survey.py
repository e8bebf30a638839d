"""The SQL store's survey of itself: summaries of every session, storage faults.

Transaction bodies (plain functions of a `Connection`) for the tools: the
command line's ``ls`` and ``verify``. They read every session at once, so
they are built in SQL, not out of one query per session.
"""

from __future__ import annotations

from sqlalchemy import Connection, exists, func, select

from sessionstore.backends.base import decode_stored_meta
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.digests import ENTRY_COLUMNS, entry_digest, header_digest
from sessionstore.backends.sql.tables import entries, sessions
from sessionstore.errors import CorruptSessionError
from sessionstore.models import SessionMeta
from sessionstore.store import SessionSummary

__all__ = ["broken_chains", "faults", "summaries"]

_inside = entries.c.session_pk == sessions.c.pk
_SUMMARIES = select(
    sessions.c.id,
    sessions.c.header,
    select(func.coalesce(func.max(entries.c.seq), 0)).where(_inside).scalar_subquery(),
    select(entries.c.timestamp)
    .where(_inside)
    .order_by(entries.c.seq.desc())
    .limit(1)
    .scalar_subquery(),
    exists().where(_inside, entries.c.type == "compaction"),
).order_by(sessions.c.pk)

_low, _high = func.min(entries.c.seq), func.max(entries.c.seq)
_GAPS = (
    select(sessions.c.id, func.count(), _low, _high)
    .join(entries, entries.c.session_pk == sessions.c.pk)
    .group_by(sessions.c.pk, sessions.c.id)
    .having((func.count() != _high) | (_low != 1))
)


def summaries(conn: Connection, *, where: str) -> list[SessionSummary]:
    """Every session at a glance, in creation order (``where``: the sessions table).

    Entries are counted, not decoded; a header that does not decode is the
    summary's ``fault``, its ``meta`` holding only the row's id.
    """
    found = []
    for session_id, header, count, last, compacted in conn.execute(_SUMMARIES):
        try:
            meta, fault = decode_stored_meta(session_id, header, path=where, line_no=1), None
        except CorruptSessionError as exc:
            meta, fault = SessionMeta(id=session_id), str(exc)
        found.append(SessionSummary(meta, count, last, bool(compacted), fault))
    return found


def faults(conn: Connection, *, where: str) -> list[str]:
    """The storage's faults: the database's own checks, gaps in ``seq``,
    headers that do not decode or name another row (``where``: the sessions
    table), and the first row of each session whose line no longer matches
    its chain of digests."""
    found = []
    if conn.dialect.name == "sqlite":
        checked = conn.exec_driver_sql("PRAGMA integrity_check").scalars()
        found += [f"integrity_check: {row}" for row in checked if row != "ok"]
        keys = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
        found += [f"foreign_key_check: {tuple(row)}" for row in keys]
    found += [
        f"session {session_id!r}: {count} entries but seq runs {low}..{high}"
        for session_id, count, low, high in conn.execute(_GAPS)
    ]
    # list() reads headers alone; here each must also name its row.
    for session_id, header in Q.SESSIONS.all(conn):
        try:
            decode_stored_meta(session_id, header, path=where, line_no=1)
        except CorruptSessionError as exc:
            found.append(str(exc))
    found += broken_chains(conn)
    return found


_PAGE = 2000  # entry rows read at a time


def broken_chains(conn: Connection) -> list[str]:
    """For each session whose chain of digests breaks, where it first breaks.

    Reads every line once, a page of rows at a time.
    """
    found = []
    for pk, session_id, header, stored in Q.SESSION_DIGESTS.all(conn):
        digest = header_digest(header)
        if stored is None or bytes(stored) != digest:
            found.append(_broken(session_id, "its header", stored))
            continue
        done = 0
        while rows := Q.ENTRY_DIGESTS.all(conn, pk=pk, after=done, size=_PAGE):
            for seq, stored, *columns in rows:
                digest = entry_digest(digest, dict(zip(ENTRY_COLUMNS, columns, strict=True)))
                if stored is None or bytes(stored) != digest:
                    entry_id = bytes(columns[0]).decode(errors="replace")
                    found.append(_broken(session_id, f"entry {seq} ({entry_id!r})", stored))
                    break
            else:
                done = rows[-1][0]
                continue
            break
    return found


def _broken(session_id: str, what: str, stored: bytes | None) -> str:
    if stored is None:
        return f"session {session_id!r}: {what} has no digest"
    return (
        f"session {session_id!r}: {what} does not match its digest: "
        "its row changed after it was written"
    )
