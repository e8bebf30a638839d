"""The SQL store's frequent statements, built once.

SQLAlchemy caches the compiled form of a statement, but building the
statement object anew on every call (coercing each clause, then computing
its cache key) cost several times the statement's own run on SQLite:
about 470 us for two small SELECTs built per call, 78 us prebuilt. So the
statements on the hot paths are made here, once, with bound parameters
named for what they take.
"""

from __future__ import annotations

from sqlalchemy import bindparam, func, insert, select

from sessionstore.backends.sql.tables import entries, journal_lines, sessions

__all__ = [
    "FIND_SESSION",
    "FIND_SESSION_LOCKED",
    "HEADERS",
    "INSERT_ENTRIES",
    "JOURNAL_LAST_ROW",
    "JOURNAL_LINES",
    "KEPT_MESSAGES",
    "LAST_COMPACTION",
    "LAST_SEQ",
    "LINES",
    "MESSAGES",
    "PAGE",
]

_pk = entries.c.session_pk == bindparam("pk")

FIND_SESSION = select(sessions.c.pk, sessions.c.header).where(sessions.c.id == bindparam("id"))
"""A session's row by id (``id``)."""

FIND_SESSION_LOCKED = FIND_SESSION.with_for_update()
"""The same, locking the row until commit (PostgreSQL; SQLite's writer lock suffices)."""

LAST_SEQ = select(func.coalesce(func.max(entries.c.seq), 0)).where(_pk)
"""The last ``seq`` of a session (``pk``), 0 when it has no entry."""

INSERT_ENTRIES = insert(entries)
"""Entry rows, executed with a list of them."""

LINES = select(entries.c.seq, entries.c.line).where(_pk).order_by(entries.c.seq)
"""Every entry line of a session (``pk``), in order."""

PAGE = (
    select(entries.c.seq, entries.c.line)
    .where(_pk, entries.c.seq > bindparam("after"), entries.c.seq <= bindparam("end"))
    .order_by(entries.c.seq)
    .limit(bindparam("size"))
)
"""Up to ``size`` entry lines of a session (``pk``) with ``after < seq <= end``."""

LAST_COMPACTION = (
    select(entries.c.seq, entries.c.line, entries.c.first_kept_id)
    .where(_pk, entries.c.type == "compaction")
    .order_by(entries.c.seq.desc())
    .limit(1)
)
"""The last compaction of a session (``pk``), through its partial index."""

MESSAGES = (
    select(entries.c.seq, entries.c.line)
    .where(_pk, entries.c.type == "message")
    .order_by(entries.c.seq)
)
"""Every message line of a session (``pk``)."""

_first_kept = (
    select(func.min(entries.c.seq))
    .where(_pk, entries.c.entry_id == bindparam("kept"), entries.c.type == "message")
    .scalar_subquery()
)
KEPT_MESSAGES = (
    select(entries.c.seq, entries.c.line)
    .where(
        _pk,
        entries.c.type == "message",
        entries.c.seq >= func.coalesce(_first_kept, bindparam("after")),
    )
    .order_by(entries.c.seq)
)
"""The messages a compaction keeps: from the first message whose id is
``kept`` on, or, when none has it, from ``seq`` ``after`` on."""

HEADERS = select(sessions.c.id, sessions.c.header).order_by(sessions.c.pk)
"""Every session's id and header line, in creation order."""

_journal = journal_lines.c.journal == bindparam("name")
_last_clear = (
    select(func.coalesce(func.max(journal_lines.c.seq), 0))
    .where(_journal, journal_lines.c.line.is_(None))
    .scalar_subquery()
)
JOURNAL_LINES = (
    select(journal_lines.c.line)
    .where(_journal, journal_lines.c.seq > _last_clear)
    .order_by(journal_lines.c.seq)
)
"""A journal's lines after its last clear (``name``)."""

JOURNAL_LAST_ROW = (
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal)
    .order_by(journal_lines.c.seq.desc())
    .limit(1)
)
"""A journal's last row (``name``): its seq, and its line (None for a clear)."""
