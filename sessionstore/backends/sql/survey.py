"""The SQL store's survey of itself: summaries of sessions, storage faults,
each built in a few statements over many sessions, not a query per session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, func, literal_column, select

from sessionstore.backends.records import decode_stored_meta
from sessionstore.backends.sql import heads as heads_module
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import titles as titles_module
from sessionstore.backends.sql import wordcheck
from sessionstore.backends.sql.digests import (
    ENTRY_COLUMNS,
    entry_digest,
    fork_digest,
    header_digest,
)
from sessionstore.backends.sql.lineage import FIRST, Family, next_rows
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.sealing import open_header
from sessionstore.backends.sql.tables import (
    activity,
    entries,
    erasing,
    erasures,
    heads,
    listing,
    sessions,
    titles,
)
from sessionstore.errors import CorruptSessionError
from sessionstore.models import SessionMeta
from sessionstore.store import SessionSummary

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

_inside = entries.c.session_pk == sessions.c.pk
_SUMMARIES = (
    select(
        sessions.c.pk,
        sessions.c.id,
        sessions.c.header,
        sessions.c.digest,
        sessions.c.base_pk,
        sessions.c.base_seq,
        select(func.max(entries.c.seq)).where(_inside).scalar_subquery(),
        select(entries.c.timestamp)
        .where(_inside)
        .order_by(entries.c.seq.desc())
        .limit(1)
        .scalar_subquery(),
        # A literal, so that SQLite takes the partial index of compactions.
        select(func.min(entries.c.seq))
        .where(_inside, entries.c.type == literal_column("'compaction'"))
        .scalar_subquery(),
        select(titles.c.title)
        .where(titles.c.session_pk == sessions.c.pk)
        .order_by(titles.c.seq.desc())
        .limit(1)
        .scalar_subquery(),
        listing.c.at,
        select(func.max(titles.c.seq))
        .where(titles.c.session_pk == sessions.c.pk)
        .scalar_subquery(),
    )
    .join(listing, listing.c.session_pk == sessions.c.pk)
    .where(sessions.c.pk.in_(bindparam("pks", expanding=True)))
)
_CHUNK = 500  # sessions summarised per statement

_shared = func.coalesce(sessions.c.base_seq, 0)
_low, _high = func.min(entries.c.seq), func.max(entries.c.seq)
_GAPS = (
    select(sessions.c.id, func.count(), _low, _high, _shared)
    .join(entries, entries.c.session_pk == sessions.c.pk)
    .group_by(sessions.c.pk, sessions.c.id, sessions.c.base_seq)
    .having((func.count() != _high - _shared) | (_low != _shared + 1))
)

_l, _a = listing.alias("l"), activity.alias("a")
_UNLISTED = (
    select(sessions.c.id, _l.c.session_id)
    .outerjoin(_l, _l.c.session_pk == sessions.c.pk)
    .where(_l.c.session_pk.is_(None) | (_l.c.session_id != sessions.c.id))
    .order_by(sessions.c.pk)
)
_of_listed = _a.c.session_pk == _l.c.session_pk
_NOT_AT_LAST_ACTIVITY = (
    select(_l.c.session_id)
    .where(
        ~select(_a.c.tick).where(_of_listed, _a.c.tick == _l.c.tick, _a.c.at == _l.c.at).exists()
        | select(_a.c.tick).where(_of_listed, _a.c.tick > _l.c.tick).exists()
    )
    .order_by(_l.c.session_pk)
)
_TIMESTAMP_AT = Query(
    select(entries.c.timestamp).where(
        entries.c.session_pk == bindparam("pk"), entries.c.seq == bindparam("seq")
    )
)


def summaries(
    conn: Connection, pks: Sequence[int], *, where: str, sealer: Sealer | None = None
) -> dict[int, SessionSummary]:
    """The summaries of the sessions ``pks`` still there, by key, no cursor
    set; entries counted, not decoded, a fork's shared ones too."""
    found: dict[int, SessionSummary] = {}
    family = Family()  # the chains of bases above these sessions, each read once
    for start in range(0, len(pks), _CHUNK):
        rows = conn.execute(_SUMMARIES, {"pks": list(pks[start : start + _CHUNK])}).all()
        family.read(conn, [row.base_pk for row in rows if row.base_pk is not None])
        for row in rows:
            fields: tuple[Any, ...] = tuple(row)
            found[row[0]] = _summary(conn, family, *fields, where=where, sealer=sealer)
    return found


def _summary(
    conn: Connection,
    family: Family,
    pk: int,
    session_id: str,
    header: str,
    digest: bytes | None,
    base_pk: int | None,
    base_seq: int | None,
    last: int | None,
    last_timestamp: str | None,
    first_compaction: int | None,
    title: str | None,
    active_at: str,
    title_seq: int | None,
    *,
    where: str,
    sealer: Sealer | None,
) -> SessionSummary:
    count, compacted, fault = last or base_seq or 0, first_compaction is not None, None
    try:
        header = open_header(sealer, session_id, header, where)
        meta = decode_stored_meta(session_id, header, path=where, line_no=1)
        title = titles_module.opened(sealer, session_id, title_seq or 0, title)
    except CorruptSessionError as exc:
        meta, fault, title = SessionMeta(id=session_id), str(exc), None
    if base_pk is not None and base_seq:
        broken = family.broken(base_pk, base_seq)
        if broken is not None:
            fault = fault or str(CorruptSessionError(session_id, broken))
        else:
            if last is None:  # the base holds the last shared entry as its own row
                last_timestamp = _TIMESTAMP_AT.scalar(conn, pk=base_pk, seq=base_seq)
            compacted = compacted or family.compacted(base_pk, base_seq)
    return SessionSummary(
        meta=meta,
        entries=count,
        last_timestamp=last_timestamp,
        compacted=compacted,
        fault=fault,
        # The last change's title, or the header's (`current_title`).
        title=meta.title if title is None else title,
        last_activity=active_at,
    )


# A head's or a session's titles' history with a position missing: ``seq``
# runs 1, 2, 3... in each.
_HEAD_GAPS = (
    select(heads.c.name, func.count(), func.max(heads.c.seq))
    .group_by(heads.c.name)
    .having((func.count() != func.max(heads.c.seq)) | (func.min(heads.c.seq) != 1))
)
_TITLE_GAPS = (
    select(sessions.c.id, func.count(), func.max(titles.c.seq))
    .join(titles, titles.c.session_pk == sessions.c.pk)
    .group_by(sessions.c.pk, sessions.c.id)
    .having((func.count() != func.max(titles.c.seq)) | (func.min(titles.c.seq) != 1))
)

# SQLite: an erasure still named in ``erasing`` once its transaction ended.
_OPEN_ERASURES = (
    select(erasures.c.seq, erasures.c.kind, erasures.c.name)
    .join(erasing, erasing.c.erasure == erasures.c.seq)
    .order_by(erasures.c.seq)
)


def faults(conn: Connection, *, where: str, sealer: Sealer | None = None) -> list[str]:
    """The storage's faults (docs/sql.md names what is checked)."""
    found = []
    if conn.dialect.name == "postgresql":  # one snapshot: writes meanwhile are not faults
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    if conn.dialect.name == "sqlite":
        checked = conn.exec_driver_sql("PRAGMA integrity_check").scalars()
        found += [f"integrity_check: {row}" for row in checked if row != "ok"]
        keys = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
        found += [f"foreign_key_check: {tuple(row)}" for row in keys]
        found += [
            f"{kind} {name!r}: erasure {seq} was left open (its rows may have been "
            "deleted in part, by hand: an erase closes it in its own transaction)"
            for seq, kind, name in conn.execute(_OPEN_ERASURES)
        ]
    found += [
        f"session {session_id!r}: {count} entries but seq runs {low}..{high}"
        + (f" (it shares {shared})" if shared else "")
        for session_id, count, low, high, shared in conn.execute(_GAPS)
    ]
    # list() reads headers alone; here each must also name its row.
    for session_id, header in Q.SESSIONS.all(conn):
        try:
            header = open_header(sealer, session_id, header, where)
            decode_stored_meta(session_id, header, path=where, line_no=1)
        except CorruptSessionError as exc:
            found.append(str(exc))
    found += [
        f"session {session_id!r}: "
        + ("not listed" if listed is None else f"listed as {listed!r}")
        + " (summaries would leave it out)"
        for session_id, listed in conn.execute(_UNLISTED)
    ]
    found += [
        f"session {session_id!r}: listed at another write than its last activity"
        for (session_id,) in conn.execute(_NOT_AT_LAST_ACTIVITY)
    ]
    found += [
        f"head {name!r}: {count} positions but seq runs to {high} (a position was deleted)"
        for name, count, high in conn.execute(_HEAD_GAPS)
    ]
    found += [
        f"session {session_id!r}: {count} title changes but seq runs to {high} "
        "(a change was deleted)"
        for session_id, count, high in conn.execute(_TITLE_GAPS)
    ]
    if sealer is not None:
        found += heads_module.faults(conn, sealer=sealer)
    found += broken_chains(conn, sealer)
    found += wordcheck.faults(conn, sealer)
    return found


def broken_chains(conn: Connection, sealer: Sealer | None = None) -> list[str]:
    """Where each session's chain of digests first breaks (sealed: its first
    row that does not open), reading every line once, a page at a time."""
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
        done, size, sealed = 0, FIRST, sealer is not None
        while rows := Q.ENTRY_DIGESTS.all(conn, pk=pk, after=done, size=size):
            for seq, stored, *columns in rows:
                if sealed and sealer is not None:
                    try:
                        sealer.open("entry", session_id, seq, bytes(columns[-1]), where="entries")
                    except CorruptSessionError as exc:
                        found.append(str(exc))
                        sealed = False  # the first such row of the session
                digest = entry_digest(digest, dict(zip(ENTRY_COLUMNS, columns, strict=True)))
                if stored is None or bytes(stored) != digest:
                    entry_id = bytes(columns[0]).decode(errors="replace")
                    found.append(_broken(session_id, f"entry {seq} ({entry_id!r})", stored))
                    break
            else:
                done = rows[-1][0]
                size = next_rows(len(rows), sum(len(row[-1]) for row in rows))
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
