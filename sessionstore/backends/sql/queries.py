"""The SQL store's frequent statements, each a `Query`, named by what it
reads or writes; ``pk`` is a session's key, ``name`` a journal's or head's,
``after < seq <= end`` a range of entries."""

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

# FOR NO KEY UPDATE (PostgreSQL): a fork of the session, whose foreign key
# takes a key-share lock on it, need not wait for the appends.
FIND_SESSION_LOCKED = Query(_find.with_for_update(key_share=True))

SESSION_ID = Query(select(sessions.c.id).where(sessions.c.pk == bindparam("pk")))

INSERT_SESSION = Query(
    insert(sessions)
    .values({column.name: bindparam(column.name) for column in sessions.c if column.name != "pk"})
    .returning(sessions.c.pk)
)

_last_seq = select(func.coalesce(func.max(entries.c.seq), 0)).where(_pk)
LAST_SEQ = Query(_last_seq)

LAST_ENTRY = Query(
    select(entries.c.seq, entries.c.digest).where(_pk).order_by(entries.c.seq.desc()).limit(1)
)

ENTRY_ID_AT = Query(select(entries.c.entry_id).where(_pk, entries.c.seq == bindparam("seq")))

INSERT_ENTRIES = Query(insert(entries))

_page = (
    entries.c.session_pk == bindparam("pk"),
    entries.c.seq > bindparam("after"),
    entries.c.seq <= bindparam("end"),
)

# As stored bytes: a line that is not UTF-8 is then named by the decoder.
LINES = Query(
    select(entries.c.seq, Utf8Bytes(entries.c.line)).where(*_page).order_by(entries.c.seq)
)

# Up to ``size`` lines; PAGE_BYTES as UTF-8 bytes, which an export writes undecoded.
PAGE, PAGE_BYTES = (
    Query(
        select(entries.c.seq, line).where(*_page).order_by(entries.c.seq).limit(bindparam("size"))
    )
    for line in (entries.c.line, Utf8Bytes(entries.c.line))
)

# The context's statements read up to a given ``end`` seq: on PostgreSQL
# each statement sees its own snapshot, and the bound keeps them to one
# prefix of the log. They run once per span of a fork's history
# (`lineage`), bounded by ``after`` too.
_upto = entries.c.seq <= bindparam("end")

# Through the partial index of compactions.
LAST_COMPACTION = Query(
    select(entries.c.seq, entries.c.line, entries.c.first_kept_id, entries.c.entry_id)
    .where(*_page, _COMPACTION)
    .order_by(entries.c.seq.desc())
    .limit(1)
)

MESSAGES = Query(
    select(entries.c.seq, entries.c.entry_id, entries.c.line)
    .where(*_page, _MESSAGE)
    .order_by(entries.c.seq)
)

FIRST_MESSAGE_WITH_ID = Query(
    select(func.min(entries.c.seq)).where(*_page, entries.c.entry_id == bindparam("id"), _MESSAGE)
)

ENTRY_DIGEST = Query(select(entries.c.digest).where(_pk, entries.c.seq == bindparam("seq")))

_first_kept = (
    select(func.min(entries.c.seq))
    .where(_pk, entries.c.entry_id == bindparam("kept"), _MESSAGE, _upto)
    .scalar_subquery()
)
# The messages a compaction keeps: from the first message whose id is
# ``kept`` on, else from ``after`` on (a fork's spans use FIRST_MESSAGE_WITH_ID).
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

ENTRIES_AFTER = Query(
    select(entries.c.seq, entries.c.entry_id, entries.c.line, entries.c.type)
    .where(_pk, entries.c.seq > bindparam("after"), _upto)
    .order_by(entries.c.seq)
)

SESSION_COUNT = Query(select(func.count()).select_from(sessions))

HEADERS_AFTER = Query(
    select(sessions.c.pk, sessions.c.header, sessions.c.id)
    .where(sessions.c.pk > bindparam("after"))
    .order_by(sessions.c.pk)
)

SESSIONS = Query(select(sessions.c.id, sessions.c.header).order_by(sessions.c.pk))

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

# ``seq``, ``digest``, then the ENTRY_COLUMNS as stored bytes (whatever they hold).
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

_journal = journal_lines.c.journal == bindparam("name")
_cleared = journal_lines.c.line.is_(None)
_last_clear = select(func.coalesce(func.max(journal_lines.c.seq), 0)).where(_journal, _cleared)
LAST_CLEAR = Query(_last_clear)
last_clear = _last_clear.scalar_subquery()
JOURNAL_LINES = Query(
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal, journal_lines.c.seq > last_clear)
    .order_by(journal_lines.c.seq)
)

JOURNAL_LAST_ROW = Query(
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal)
    .order_by(journal_lines.c.seq.desc())
    .limit(1)
)

INSERT_JOURNAL_LINES = Query(insert(journal_lines))

LOCK_JOURNAL = Query(
    select(func.pg_advisory_xact_lock(func.hashtextextended(bindparam("name"), 0)))
)

_head = heads.c.name == bindparam("name")

HEAD_HISTORY = Query(select(heads.c.session_id, heads.c.at).where(_head).order_by(heads.c.seq))

HEAD_LAST = Query(
    select(heads.c.seq, heads.c.session_id).where(_head).order_by(heads.c.seq.desc()).limit(1)
)

HEAD_NAMES = Query(select(heads.c.name).distinct().order_by(heads.c.name))

INSERT_HEAD = Query(insert(heads))

# Seeded apart from LOCK_JOURNAL.
LOCK_HEAD = Query(select(func.pg_advisory_xact_lock(func.hashtextextended(bindparam("name"), 1))))

# ---------------------------------------------------------------- erasures

# Locked against appends and forks alike (FOR UPDATE; SQLite's writer lock suffices).
FIND_SESSION_ERASED = Query(_find.with_for_update())

FORKS_OF = Query(
    select(sessions.c.id).where(sessions.c.base_pk == bindparam("pk")).order_by(sessions.c.pk)
)

# Changes only when something was erased: a cache noting it knows when to look again.
_erasure_mark = select(func.coalesce(func.max(erasures.c.seq), 0))
ERASURE_MARK = Query(_erasure_mark)

# ERASURE_MARK and LAST_SEQ in one statement, one snapshot.
CONTEXT_PROBE = Query(select(_erasure_mark.scalar_subquery(), _last_seq.scalar_subquery()))

INSERT_ERASURE = Query(
    insert(erasures)
    .values({c.name: bindparam(c.name) for c in erasures.c if c.name != "seq"})
    .returning(erasures.c.seq)
)

ERASURES = Query(select(*(c for c in erasures.c if c.name != "seq")).order_by(erasures.c.seq))

# SQLite: the erasure under way, named for the DELETE triggers.
INSERT_ERASING = Query(insert(erasing))

CLOSE_ERASING = Query(delete(erasing).where(erasing.c.erasure == bindparam("erasure")))

DELETE_ENTRIES = Query(delete(entries).where(_pk))

DELETE_SESSION = Query(delete(sessions).where(sessions.c.pk == bindparam("pk")))

DELETE_JOURNAL = Query(delete(journal_lines).where(_journal))

# Every line a journal ever held, before its clears too.
JOURNAL_HISTORY = Query(
    select(journal_lines.c.seq, journal_lines.c.line)
    .where(_journal, journal_lines.c.line.is_not(None))
    .order_by(journal_lines.c.seq)
)
