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
* ``journal_keys`` (0011): the index of keyed journal lines (a top-level
  string ``"key"``, `sessionstore.wire.line_key`), a row per keyed line:
  its journal, its key (in a sealed store the key's token, never the
  key) and its ``seq``. Derived from the lines, so not append-only: its
  rows go with their lines (an erase, a drop). ``journal_unindexed``:
  the journals of a sealed store whose lines the migration could not
  open to index (it has no keys); the first open with the keys indexes
  them and empties it.
* ``heads``: every position of each named head, ``seq`` = 1, 2, 3... per
  name; the last is where it stands. ``head_seals`` (0010): in a sealed
  store, what authenticates each of them (`sessionstore.backends.sql.heads`).
* ``erasures``: the record each erasure leaves (`Erasure`), ``seq`` giving
  their order. Rows of ``sessions``, ``entries`` and ``journal_lines``
  leave only with one of these, written in the same transaction (0004).
* ``erasing`` (SQLite only): while an erase runs, the ``seq`` of its
  erasure, which the DELETE triggers look for; empty outside an erase. An
  erasure leaves it only once all it names is gone, and is then *spent*:
  ``erasures_spent`` (append-only) keeps it, and it is never named again
  (0007). On PostgreSQL a trigger deferred to the commit refuses an
  erasure whose session or journal is still there.
* ``titles``: every title a session was given after its creation
  (`TitleChange`), ``seq`` = 1, 2, 3... per session; the last is its title.
* ``activity``: one row per write to a session (its creation, a fork, an
  import, a transaction of appends that stored lines): ``tick`` counts
  them across the database and is never given twice (on PostgreSQL from
  the sequence ``activity_ticks``; on SQLite, with its one writer, one
  past every tick listed or in ``spent_ticks``), ``at`` is the write's time.
* ``spent_ticks`` (SQLite only): the last tick of an erased session, when
  greater than any recorded before, so that no tick is given twice.
* ``listing``: one row per session, what a page of `summaries` is read
  from (`sessionstore.backends.sql.browse`): its id, owner and
  ``created_at`` (decoded from its header), the ``created_tick`` of its
  first activity, and the ``tick`` and ``at`` of its last, which a trigger
  on ``activity`` moves ahead (the one table whose rows change, and only
  so). Titles, activity and listing rows leave with their session's
  erasure (0005).
* ``sealing``: one row in a store sealed by encryption at rest (0008): the
  store's id, which its keyring serves, and the cipher's scheme; none in a
  plain store (`sessionstore.backends.sql.sealing`).
* The word index of `search` (`sessionstore.backends.sql.wordindex`),
  derived from the entries and so not append-only: on SQLite
  ``search_postings``, one row per word of each session's messages indexed
  together, the messages holding it packed with their ``hits`` and ``length``
  in words (`sessionstore.backends.sql.postings`), and ``search_mark``, how far along ``entries``
  (by rowid) messages are indexed; on PostgreSQL ``search_vectors``, one
  ``tsvector`` of each message's words with a GIN index.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    TextClause,
    text,
)
from sqlalchemy.types import UserDefinedType

__all__ = [
    "APPEND_ONLY_TABLES",
    "POSTGRESQL_ONLY",
    "SQLITE_ONLY",
    "TsVector",
    "activity",
    "compared_metadata",
    "entries",
    "erasing",
    "erasures",
    "erasures_spent",
    "head_seals",
    "heads",
    "journal_keys",
    "journal_lines",
    "journal_unindexed",
    "listing",
    "metadata",
    "sealing",
    "search_mark",
    "search_postings",
    "search_vectors",
    "sessions",
    "spent_ticks",
    "titles",
]


class TsVector(UserDefinedType[str]):
    """PostgreSQL's ``tsvector``, named here rather than imported from
    SQLAlchemy's PostgreSQL dialect, whose import (about 65 ms) a process
    opening a SQLite store would pay for nothing."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "TSVECTOR"


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
# Text a listing sorts by: compared as code points, as Python compares
# strings (SQLite's own text order; PostgreSQL's "C" collation).
_Sorted = Text().with_variant(Text(collation="C"), "postgresql")

_DIALECT_OPTIONS: list[tuple[Index, dict[str, Any]]] = []


def _options(index: Index, **options: Any) -> Index:
    """``index``, its dialects' ``options`` (a partial index's WHERE,
    PostgreSQL's GIN) kept aside for `compared_metadata`: naming a dialect's
    option loads that dialect, which for PostgreSQL's costs a process
    opening SQLite about 55 ms."""
    _DIALECT_OPTIONS.append((index, options))
    return index


def _partial(index: Index, where: TextClause) -> Index:
    """``index`` over the rows ``where`` holds, on both databases."""
    return _options(index, sqlite_where=where, postgresql_where=where)


def compared_metadata() -> MetaData:
    """`metadata` with each index's dialect options: what the migrations'
    environment compares a database with (``alembic check``). The store's
    statements never need them: the migrations create the tables."""
    while _DIALECT_OPTIONS:
        index, options = _DIALECT_OPTIONS.pop()
        index.dialect_kwargs.update(options)
    return metadata


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
    _partial(Index("ix_sessions_base_pk", "base_pk"), text("base_pk IS NOT NULL")),
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
    _partial(Index("ix_entries_compactions", "session_pk", "seq"), text("type = 'compaction'")),
)

journal_lines = Table(
    "journal_lines",
    metadata,
    Column("journal", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("line", LargeBinary, nullable=True),
    _partial(Index("ix_journal_lines_clears", "journal", "seq"), text("line IS NULL")),
)

# The index of keyed lines (0011): derived from journal_lines, rows go with theirs.
journal_keys = Table(
    "journal_keys",
    metadata,
    Column("journal", Text, primary_key=True),
    Column("key", _Sorted, primary_key=True),  # a sealed store's: the key's token
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)

journal_unindexed = Table(
    "journal_unindexed",
    metadata,
    Column("journal", Text, primary_key=True),
)

heads = Table(
    "heads",
    metadata,
    Column("name", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("session_id", Text, nullable=False),
    Column("at", Text, nullable=False),
)

head_seals = Table(
    "head_seals",
    metadata,
    Column("name", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("seal", Text, nullable=False),
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
    Column("key", Text, nullable=True),  # the data key destroyed, in a sealed store (0008)
    Column("keys", BigInteger, nullable=True),  # a drop of keyed lines: how many keys (0011)
    # The DELETE triggers look an erasure up by what it erases.
    Index("ix_erasures_kind_name", "kind", "name"),
)

erasing = Table(
    "erasing",
    metadata,
    Column("erasure", _Key, ForeignKey("erasures.seq"), primary_key=True, autoincrement=False),
)

erasures_spent = Table(
    "erasures_spent",
    metadata,
    Column("erasure", _Key, ForeignKey("erasures.seq"), primary_key=True, autoincrement=False),
)

titles = Table(
    "titles",
    metadata,
    Column("session_pk", _Key, ForeignKey("sessions.pk"), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("title", Text, nullable=True),  # None: back to the header's title
    Column("at", Text, nullable=False),
)

activity = Table(
    "activity",
    metadata,
    Column("session_pk", _Key, ForeignKey("sessions.pk"), primary_key=True),
    Column("tick", BigInteger, primary_key=True, autoincrement=False),
    Column("at", Text, nullable=False),
    # Clustered by session: one b-tree, where a session's last tick up to a
    # listing's mark is looked up (no rowid, no second index to write).
    sqlite_with_rowid=False,
)

# The owner indexes hold only sessions that have one: an append to a
# session without an owner writes no page of theirs.
_OWNED = text("owner IS NOT NULL")

listing = Table(
    "listing",
    metadata,
    Column("session_pk", _Key, ForeignKey("sessions.pk"), primary_key=True, autoincrement=False),
    Column("session_id", _Sorted, nullable=False),
    Column("owner", Text, nullable=True),
    Column("created_at", _Sorted, nullable=False),
    Column("created_tick", BigInteger, nullable=False),
    Column("tick", BigInteger, nullable=False),
    Column("at", Text, nullable=False),
    Index("ix_listing_tick", "tick"),
    _partial(Index("ix_listing_owner_tick", "owner", "tick"), _OWNED),
    Index("ix_listing_created_at_session_id", "created_at", "session_id"),
    _partial(
        Index("ix_listing_owner_created_at_session_id", "owner", "created_at", "session_id"),
        _OWNED,
    ),
)

spent_ticks = Table(
    "spent_ticks",
    metadata,
    Column("tick", _Key, primary_key=True, autoincrement=False),
)

sealing = Table(
    "sealing",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # the one row: 1
    Column("store_id", Text, nullable=False),
    Column("scheme", Text, nullable=False),
    CheckConstraint("id = 1", name="one_row"),
)

# The word index: derived from the entries' lines, rebuilt by the migration
# that adds it (0006); its rows go with their entries' in an erase.
search_postings = Table(
    "search_postings",
    metadata,
    Column("word", Text, primary_key=True),
    Column("session_pk", _Key, primary_key=True),
    Column("batch", BigInteger, primary_key=True, autoincrement=False),  # its first seq
    # The batch's messages holding the word, packed (sessionstore.backends.sql.postings).
    Column("postings", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

search_mark = Table(
    "search_mark",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # the one row: 1
    Column("indexed", _Key, nullable=False),  # every message of rowid <= this is indexed
    Column("rule", Text, nullable=False),  # the word rule it was indexed with
)

search_vectors = Table(
    "search_vectors",
    metadata,
    Column("session_pk", _Key, primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("words", TsVector(), nullable=True),  # NULL: too many words for a tsvector
    Column("length", Integer, nullable=False),
    _options(Index("ix_search_vectors_words", "words"), postgresql_using="gin"),
    _options(
        Index("ix_search_vectors_unindexed", "session_pk", "seq"),
        postgresql_where=text("words IS NULL"),
    ),
)

APPEND_ONLY_TABLES = (
    "sessions",
    "entries",
    "journal_lines",
    "heads",
    "head_seals",
    "erasures",
    "titles",
    "activity",
    "spent_ticks",
    "erasures_spent",
    "sealing",
)
"""The tables whose rows never change (``listing`` moves its ticks ahead)."""

SQLITE_ONLY = frozenset(
    {"erasing", "erasures_spent", "spent_ticks", "search_mark", "search_postings"}
)
"""Tables only a SQLite database holds (PostgreSQL's triggers need no
``erasing`` nor ``spent_ticks``; its word index is ``search_vectors``)."""

POSTGRESQL_ONLY = frozenset({"search_vectors"})
"""Tables only a PostgreSQL database holds."""
