"""The SQL schema, as SQLAlchemy Core tables: the one place it is defined.

Append-only by design, and enforced by the database itself: the migrations
add triggers that abort every UPDATE and DELETE on these tables, and on
SQLite every INSERT that would replace a row (``INSERT OR REPLACE``,
``REPLACE INTO``), so not even a raw SQL statement can rewrite history.

* ``sessions``: one row per session, the header line kept verbatim; ``pk``
  gives the creation order; ``digest`` starts the session's chain of
  digests (`sessionstore.backends.sql.digests`). A fork made by ``fork``
  shares its first ``base_seq`` entries with the session ``base_pk``
  (`sessionstore.backends.sql.lineage`); both are NULL otherwise.
* ``entries``: one row per entry, ``seq`` = 1, 2, 3... without gaps within
  a session, the line kept verbatim; ``type``, ``entry_id`` and
  ``first_kept_id`` are derived from it, for the indexes that let
  `load_context` read only what it returns; ``digest`` chains the line to
  the rows before it.
* ``journal_lines``: the crash-recovery journals, one row per line; a row
  whose ``line`` is NULL records a clear.
* ``heads``: every position of each named head, ``seq`` = 1, 2, 3... per
  name; the last is where it stands.
* ``erasures``: the record each erasure leaves (`Erasure`), ``seq`` giving
  their order. Rows of ``sessions``, ``entries`` and ``journal_lines``
  leave only with one of these, written in the same transaction (0004).
* ``erasing`` (SQLite only): while an erase runs, the ``seq`` of its
  erasure, which the DELETE triggers look for; empty outside an erase.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    text,
)

__all__ = [
    "APPEND_ONLY_TABLES",
    "SQLITE_ONLY",
    "entries",
    "erasing",
    "erasures",
    "heads",
    "journal_lines",
    "metadata",
    "sessions",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
    }
)

# SQLite's rowid alias must be spelled INTEGER; elsewhere 64 bits.
_Key = BigInteger().with_variant(Integer(), "sqlite")

sessions = Table(
    "sessions",
    metadata,
    Column("pk", _Key, primary_key=True, autoincrement=True),
    Column("id", Text, nullable=False, unique=True),
    Column("version", BigInteger, nullable=False),
    Column("parent_session", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("header", Text, nullable=False),
    Column("digest", LargeBinary, nullable=True),  # NULL only if written without one
    # A fork's shared history: its seq 1..base_seq are base_pk's (see lineage).
    Column("base_pk", _Key, ForeignKey("sessions.pk"), nullable=True),
    Column("base_seq", BigInteger, nullable=True),
    Index(
        "ix_sessions_base_pk",
        "base_pk",
        sqlite_where=text("base_pk IS NOT NULL"),
        postgresql_where=text("base_pk IS NOT NULL"),
    ),
)

entries = Table(
    "entries",
    metadata,
    Column("session_pk", _Key, ForeignKey("sessions.pk"), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("entry_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("timestamp", Text, nullable=False),
    Column("first_kept_id", Text, nullable=True),
    Column("line", Text, nullable=False),
    Column("digest", LargeBinary, nullable=True),
    # seq included: the first message with an id is found in the index alone.
    Index("ix_entries_entry_id", "session_pk", "entry_id", "seq"),
    Index(
        "ix_entries_compactions",
        "session_pk",
        "seq",
        sqlite_where=text("type = 'compaction'"),
        postgresql_where=text("type = 'compaction'"),
    ),
)

journal_lines = Table(
    "journal_lines",
    metadata,
    Column("journal", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("line", LargeBinary, nullable=True),
    Index(
        "ix_journal_lines_clears",
        "journal",
        "seq",
        sqlite_where=text("line IS NULL"),
        postgresql_where=text("line IS NULL"),
    ),
)

heads = Table(
    "heads",
    metadata,
    Column("name", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("session_id", Text, nullable=False),
    Column("at", Text, nullable=False),
)

erasures = Table(
    "erasures",
    metadata,
    Column("seq", _Key, primary_key=True, autoincrement=True),
    Column("kind", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("at", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("lines", BigInteger, nullable=False),
    Column("digest", Text, nullable=False),
    # The DELETE triggers look an erasure up by what it erases.
    Index("ix_erasures_kind_name", "kind", "name"),
)

erasing = Table(
    "erasing",
    metadata,
    Column("erasure", _Key, ForeignKey("erasures.seq"), primary_key=True, autoincrement=False),
)

APPEND_ONLY_TABLES = ("sessions", "entries", "journal_lines", "heads", "erasures")

SQLITE_ONLY = frozenset({"erasing"})
"""Tables only a SQLite database holds (PostgreSQL's triggers need none)."""
