"""The SQL store's frequent statements, each a `Query` (compiled once per
dialect and run on the driver's cursor, `sessionstore.backends.sql.query`),
named by what it reads or writes."""

from __future__ import annotations

from sqlalchemy import (
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
)

from sessionstore.backends.sql.digests import ENTRY_COLUMNS
from sessionstore.backends.sql.query import Query, Utf8Bytes
from sessionstore.backends.sql.tables import (
    entries,
    erasing,
    erasures,
    heads,
    journal_lines,
    sessions,
)

__all__ = [
    "CLOSE_ERASING",
    "CONTEXT_PROBE",
    "DELETE_ENTRIES",
    "DELETE_JOURNAL",
    "DELETE_SESSION",
    "ENTRIES_AFTER",
    "ENTRY_DIGEST",
    "ENTRY_DIGESTS",
    "ENTRY_ID_AT",
    "ERASURES",
    "ERASURE_MARK",
    "FIND_SESSION",
    "FIND_SESSION_ERASED",
    "FIND_SESSION_LOCKED",
    "FIRST_MESSAGE_WITH_ID",
    "FORKS_OF",
    "HEADERS_AFTER",
    "HEAD_HISTORY",
    "HEAD_LAST",
    "HEAD_NAMES",
    "INSERT_ENTRIES",
    "INSERT_ERASING",
    "INSERT_ERASURE",
    "INSERT_HEAD",
    "INSERT_JOURNAL_LINES",
    "INSERT_SESSION",
    "JOURNAL_HISTORY",
    "JOURNAL_LAST_ROW",
    "JOURNAL_LINES",
    "KEPT_MESSAGES",
    "LAST_COMPACTION",
    "LAST_ENTRY",
    "LAST_SEQ",
    "LINES",
    "LOCK_HEAD",
    "LOCK_JOURNAL",
    "MESSAGES",
    "PAGE",
    "PAGE_BYTES",
    "SESSIONS",
    "SESSION_COUNT",
    "SESSION_DIGESTS",
    "SESSION_ID",
]

_pk = entries.c.session_pk == bindparam("pk")
# Entry types written as literals, not bound: SQLite can then tell at
# prepare time that the partial index of compactions applies, instead of
# preparing the statement again on every run (a fourfold cost here).
_COMPACTION = entries.c.type == literal_column("'compaction'")
_MESSAGE = entries.c.type == literal_column("'message'")

_find = select(
    sessions.c.pk, sessions.c.header, sessions.c.digest, sessions.c.base_pk, sessions.c.base_seq
).where(sessions.c.id == bindparam("id"))
FIND_SESSION = Query(_find)
"""A session's ``(pk, header, digest, base_pk, base_seq)`` by id (``id``)."""

FIND_SESSION_LOCKED = Query(_find.with_for_update(key_share=True))
"""The same, locking the row until commit (PostgreSQL; SQLite's writer lock
suffices). ``FOR NO KEY UPDATE``: a fork of the session, whose foreign key
takes a key-share lock on it, need not wait for the appends."""

SESSION_ID = Query(select(sessions.c.id).where(sessions.c.pk == bindparam("pk")))
"""A session's id by its key (``pk``)."""

INSERT_SESSION = Query(
    insert(sessions)
    .values({column.name: bindparam(column.name) for column in sessions.c if column.name != "pk"})
    .returning(sessions.c.pk)
)
"""A session's row, all columns but ``pk``; returns its ``pk``."""

LAST_SEQ = Query(select(func.coalesce(func.max(entries.c.seq), 0)).where(_pk))
"""The last ``seq`` of a session (``pk``), 0 when it has no entry."""

LAST_ENTRY = Query(
    select(entries.c.seq, entries.c.digest).where(_pk).order_by(entries.c.seq.desc()).limit(1)
)
"""The ``(seq, digest)`` of a session's last entry (``pk``), if any."""

ENTRY_ID_AT = Query(select(entries.c.entry_id).where(_pk, entries.c.seq == bindparam("seq")))
"""The id of a session's (``pk``) own entry ``seq``, if it holds that row."""

INSERT_ENTRIES = Query(insert(entries))
"""Entry rows, all columns (`Query.many`)."""

_page = (
    entries.c.session_pk == bindparam("pk"),
    entries.c.seq > bindparam("after"),
    entries.c.seq <= bindparam("end"),
)

LINES = Query(
    select(entries.c.seq, Utf8Bytes(entries.c.line)).where(*_page).order_by(entries.c.seq)
)
"""The entry lines of a session (``pk``) with ``after < seq <= end``, in order,
as stored bytes: a line that is not UTF-8 is then named by the decoder."""

PAGE = Query(
    select(entries.c.seq, entries.c.line)
    .where(*_page)
    .order_by(entries.c.seq)
    .limit(bindparam("size"))
)
"""Up to ``size`` entry lines of a session (``pk``) with ``after < seq <= end``."""

PAGE_BYTES = Query(
    select(entries.c.seq, Utf8Bytes(entries.c.line))
    .where(*_page)
    .order_by(entries.c.seq)
    .limit(bindparam("size"))
)
"""The same, each line as UTF-8 bytes: an export writes them with no decoding."""

# The context's statements read up to a given ``end`` seq: on PostgreSQL
# each statement sees its own snapshot, and the bound keeps them to one
# prefix of the log. They run once per span of a fork's history
# (`lineage`), bounded by ``after`` too.
_upto = entries.c.seq <= bindparam("end")

LAST_COMPACTION = Query(
    select(entries.c.seq, entries.c.line, entries.c.first_kept_id, entries.c.entry_id)
    .where(*_page, _COMPACTION)
    .order_by(entries.c.seq.desc())
    .limit(1)
)
"""The last compaction of a session (``pk``) in ``after < seq <= end``, through
its partial index."""

MESSAGES = Query(
    select(entries.c.seq, entries.c.entry_id, entries.c.line)
    .where(*_page, _MESSAGE)
    .order_by(entries.c.seq)
)
"""The messages of a session (``pk``) in ``after < seq <= end``."""

FIRST_MESSAGE_WITH_ID = Query(
    select(func.min(entries.c.seq)).where(*_page, entries.c.entry_id == bindparam("id"), _MESSAGE)
)
"""The ``seq`` of the first message of a session (``pk``) in ``after < seq <=
end`` whose id is ``id``; NULL when none is."""

ENTRY_DIGEST = Query(
    select(entries.c.digest).where(
        entries.c.session_pk == bindparam("pk"), entries.c.seq == bindparam("seq")
    )
)
"""The digest of one entry row (``pk``, ``seq``)."""

_first_kept = (
    select(func.min(entries.c.seq))
    .where(_pk, entries.c.entry_id == bindparam("kept"), _MESSAGE, _upto)
    .scalar_subquery()
)
KEPT_MESSAGES = Query(
    select(entries.c.seq, entries.c.entry_id, entries.c.line)
    .where(
        _pk,
        _MESSAGE,
        entries.c.seq >= func.coalesce(_first_kept, bindparam("after")),
        _upto,
    )
    .order_by(entries.c.seq)
)
"""The messages a compaction keeps, up to ``end``: from the first message
whose id is ``kept`` on, or, when none has it, from ``seq`` ``after`` on
(a session of one span; a fork's spans use `FIRST_MESSAGE_WITH_ID`)."""

ENTRIES_AFTER = Query(
    select(entries.c.seq, entries.c.entry_id, entries.c.line, entries.c.type)
    .where(_pk, entries.c.seq > bindparam("after"), _upto)
    .order_by(entries.c.seq)
)
"""The entries of a session (``pk``) with ``after < seq <= end``."""

SESSION_COUNT = Query(select(func.count()).select_from(sessions))
"""How many sessions the database holds."""

HEADERS_AFTER = Query(
    select(sessions.c.pk, sessions.c.header, sessions.c.id)
    .where(sessions.c.pk > bindparam("after"))
    .order_by(sessions.c.pk)
)
"""The ``(pk, header, id)`` of every session whose ``pk`` is past ``after``, in order."""

SESSIONS = Query(select(sessions.c.id, sessions.c.header).order_by(sessions.c.pk))
"""Every session's id and header line, in creation order."""

SESSION_DIGESTS = Query(
    select(
        sessions.c.pk,
        sessions.c.id,
        Utf8Bytes(sessions.c.header),
        sessions.c.digest,
        sessions.c.base_pk,
        sessions.c.base_seq,
    ).order_by(sessions.c.pk)
)
"""Every session's ``(pk, id, header bytes, digest, base_pk, base_seq)``, in
creation order."""

ENTRY_DIGESTS = Query(
    select(
        entries.c.seq,
        entries.c.digest,
        *(Utf8Bytes(entries.c[column]) for column in ENTRY_COLUMNS),
    )
    .where(_pk, entries.c.seq > bindparam("after"))
    .order_by(entries.c.seq)
    .limit(bindparam("size"))
)
"""Up to ``size`` rows of a session (``pk``) after ``after``: ``seq``,
``digest``, then the `ENTRY_COLUMNS` as stored bytes (whatever they hold)."""

_journal = journal_lines.c.journal == bindparam("name")
_last_clear = (
    select(func.coalesce(func.max(journal_lines.c.seq), 0))
    .where(_journal, journal_lines.c.line.is_(None))
    .scalar_subquery()
)
JOURNAL_LINES = Query(
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal, journal_lines.c.seq > _last_clear)
    .order_by(journal_lines.c.seq)
)
"""A journal's ``(seq, line)`` after its last clear (``name``)."""

JOURNAL_LAST_ROW = Query(
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal)
    .order_by(journal_lines.c.seq.desc())
    .limit(1)
)
"""A journal's last row (``name``): its seq, and its line (None for a clear)."""

INSERT_JOURNAL_LINES = Query(insert(journal_lines))
"""Journal rows, all columns (`Query.many`)."""

LOCK_JOURNAL = Query(
    select(func.pg_advisory_xact_lock(func.hashtextextended(bindparam("name"), 0)))
)
"""PostgreSQL: queue behind the other writers of a journal (``name``) until commit."""

_head = heads.c.name == bindparam("name")

HEAD_HISTORY = Query(select(heads.c.session_id, heads.c.at).where(_head).order_by(heads.c.seq))
"""Every position of a head (``name``), oldest first."""

HEAD_LAST = Query(
    select(heads.c.seq, heads.c.session_id).where(_head).order_by(heads.c.seq.desc()).limit(1)
)
"""A head's last ``(seq, session_id)`` (``name``), if it was ever set."""

HEAD_NAMES = Query(select(heads.c.name).distinct().order_by(heads.c.name))
"""The name of every head ever set."""

INSERT_HEAD = Query(insert(heads))
"""A head's row, all columns."""

LOCK_HEAD = Query(select(func.pg_advisory_xact_lock(func.hashtextextended(bindparam("name"), 1))))
"""PostgreSQL: queue behind the other movers of a head (``name``) until commit
(seeded apart from `LOCK_JOURNAL`)."""

# ---------------------------------------------------------------- erasures

FIND_SESSION_ERASED = Query(_find.with_for_update())
"""A session's row by id (``id``), locked against appends and forks alike
until commit (PostgreSQL ``FOR UPDATE``; SQLite's writer lock suffices)."""

FORKS_OF = Query(
    select(sessions.c.id).where(sessions.c.base_pk == bindparam("pk")).order_by(sessions.c.pk)
)
"""The ids of the forks sharing a session's own rows (``pk``), through its index."""

ERASURE_MARK = Query(select(func.coalesce(func.max(erasures.c.seq), 0)))
"""The ``seq`` of the newest erasure, 0 when none: it changes only when
something was erased, so a cache noting it knows when to look again."""

CONTEXT_PROBE = Query(
    select(
        select(func.coalesce(func.max(erasures.c.seq), 0)).scalar_subquery(),
        select(func.coalesce(func.max(entries.c.seq), 0)).where(_pk).scalar_subquery(),
    )
)
"""`ERASURE_MARK` and `LAST_SEQ` (``pk``) in one statement, one snapshot."""

INSERT_ERASURE = Query(
    insert(erasures)
    .values({c.name: bindparam(c.name) for c in erasures.c if c.name != "seq"})
    .returning(erasures.c.seq)
)
"""An erasure's row, all columns but ``seq``; returns its ``seq``."""

ERASURES = Query(
    select(
        erasures.c.kind,
        erasures.c.name,
        erasures.c.at,
        erasures.c.reason,
        erasures.c.lines,
        erasures.c.digest,
        erasures.c.key,
        erasures.c["keys"],
    ).order_by(erasures.c.seq)
)
"""Every erasure's columns but ``seq``, oldest first."""

INSERT_ERASING = Query(insert(erasing))
"""SQLite: name the erasure under way (``erasure``) for the DELETE triggers."""

CLOSE_ERASING = Query(delete(erasing).where(erasing.c.erasure == bindparam("erasure")))
"""SQLite: the erasure (``erasure``) is no longer under way: spent."""

DELETE_ENTRIES = Query(delete(entries).where(_pk))
"""A session's own entry rows (``pk``)."""

DELETE_SESSION = Query(delete(sessions).where(sessions.c.pk == bindparam("pk")))
"""A session's row (``pk``)."""

DELETE_JOURNAL = Query(delete(journal_lines).where(_journal))
"""Every row of a journal (``name``), its clears too."""

JOURNAL_HISTORY = Query(
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal, journal_lines.c.line.is_not(None))
    .order_by(journal_lines.c.seq)
)
"""Every ``(seq, line)`` a journal ever held (``name``), before its clears too."""
