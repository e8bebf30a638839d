"""The SQL store's survey of itself: summaries of every session, storage faults.

Transaction bodies (plain functions of a `Connection`) for the tools: the
command line's ``ls`` and ``verify``. They read every session at once, so
they are built in SQL, not out of one query per session.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, func, select

from sessionstore.backends.base import decode_stored_meta
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.digests import (
    ENTRY_COLUMNS,
    entry_digest,
    fork_digest,
    header_digest,
)
from sessionstore.backends.sql.tables import entries, sessions
from sessionstore.errors import CorruptSessionError
from sessionstore.models import SessionMeta
from sessionstore.store import SessionSummary

__all__ = ["broken_chains", "faults", "summaries"]

_inside = entries.c.session_pk == sessions.c.pk
_SUMMARIES = select(
    sessions.c.pk,
    sessions.c.id,
    sessions.c.header,
    sessions.c.base_pk,
    sessions.c.base_seq,
    select(func.max(entries.c.seq)).where(_inside).scalar_subquery(),
    select(entries.c.timestamp)
    .where(_inside)
    .order_by(entries.c.seq.desc())
    .limit(1)
    .scalar_subquery(),
    select(func.min(entries.c.seq))
    .where(_inside, entries.c.type == "compaction")
    .scalar_subquery(),
).order_by(sessions.c.pk)

_shared = func.coalesce(sessions.c.base_seq, 0)
_low, _high = func.min(entries.c.seq), func.max(entries.c.seq)
_GAPS = (
    select(sessions.c.id, func.count(), _low, _high, _shared)
    .join(entries, entries.c.session_pk == sessions.c.pk)
    .group_by(sessions.c.pk, sessions.c.id, sessions.c.base_seq)
    .having((func.count() != _high - _shared) | (_low != _shared + 1))
)

_TIMESTAMP_AT = select(entries.c.timestamp).where(
    entries.c.session_pk == bindparam("pk"), entries.c.seq == bindparam("seq")
)


@dataclass(frozen=True)
class _Own:
    """One session's row and what its own entry rows say."""

    session_id: str
    header: str
    base: tuple[int, int] | None  # its base's key and the entries it shares
    last: int | None  # its own last seq
    last_timestamp: str | None
    first_compaction: int | None  # the seq of its own first compaction


def summaries(conn: Connection, *, where: str) -> list[SessionSummary]:
    """Every session at a glance, in creation order (``where``: the sessions table).

    Entries are counted, not decoded; a header that does not decode is the
    summary's ``fault``, its ``meta`` holding only the row's id. A fork's
    count, last timestamp and compaction take in what it shares.
    """
    own = {
        pk: _Own(session_id, header, None if base_pk is None else (base_pk, base_seq), *rest)
        for pk, session_id, header, base_pk, base_seq, *rest in conn.execute(_SUMMARIES)
    }

    def compacted(pk: int, upto: int) -> bool:
        """Whether session ``pk`` holds a compaction among its first ``upto`` entries."""
        while True:
            first, base = own[pk].first_compaction, own[pk].base
            if first is not None and first <= upto:
                return True
            if base is None:
                return False
            pk, upto = base[0], min(upto, base[1])

    found = []
    for pk, row in own.items():
        count, last = row.last or 0, row.last_timestamp
        if row.base is not None and row.last is None:
            count = row.base[1]
            last = conn.execute(_TIMESTAMP_AT, {"pk": row.base[0], "seq": count}).scalar()
        try:
            meta, fault = (
                decode_stored_meta(row.session_id, row.header, path=where, line_no=1),
                None,
            )
        except CorruptSessionError as exc:
            meta, fault = SessionMeta(id=row.session_id), str(exc)
        found.append(SessionSummary(meta, count, last, compacted(pk, count), fault))
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
        + (f" (it shares {shared})" if shared else "")
        for session_id, count, low, high, shared in conn.execute(_GAPS)
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
    for pk, session_id, header, stored, base_pk, base_seq in Q.SESSION_DIGESTS.all(conn):
        digest = header_digest(header)
        if base_pk is not None:
            base = Q.ENTRY_DIGEST.first(conn, pk=base_pk, seq=base_seq)
            if base is None or base[0] is None:
                found.append(f"session {session_id!r}: its base has no entry {base_seq} to share")
                continue
            digest = fork_digest(header, base_seq, bytes(base[0]))
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
