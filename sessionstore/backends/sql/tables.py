"""The SQL tables, as the store's queries name them: columns and their types.

The migrations (``migrations/versions``) are the one definition of the
schema: its indexes, constraints and triggers are theirs alone. These
tables give each column the type the queries bind it with (PostgreSQL's
driver casts every parameter to it), and ``tests/backends/sql/
test_tables.py`` checks them against a migrated database, table by table
and column by column, on SQLite and PostgreSQL.

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
* ``word_keys`` (0012): in a sealed store, the id of the word key (kept in
  the keyring) of each bucket of sessions, under which the word index holds
  their words' tokens, and the row of bucket -1 once every bucket's tokens
  are under word keys (`sessionstore.backends.sql.wordkeys`); an erase
  replaces its bucket's. Empty in a plain store.
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

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, Table, Text
from sqlalchemy.types import UserDefinedType

__all__ = [
    "TsVector",
    "activity",
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
    "word_keys",
]


class TsVector(UserDefinedType[str]):
    """PostgreSQL's ``tsvector``, named here rather than imported from
    SQLAlchemy's PostgreSQL dialect, whose import (about 65 ms) a process
    opening a SQLite store would pay for nothing."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "TSVECTOR"


metadata = MetaData()

# SQLite's rowid alias must be spelled INTEGER; elsewhere 64 bits.
_Key = BigInteger().with_variant(Integer(), "sqlite")
# Text a listing sorts by: compared as code points, as Python compares
# strings (SQLite's own text order; PostgreSQL's "C" collation).
_Sorted = Text().with_variant(Text(collation="C"), "postgresql")


def _table(name: str, *columns: tuple[str, Any], key: tuple[str, ...]) -> Table:
    """The table ``name`` of these ``columns`` (name, type), ``key`` its primary key."""
    return Table(
        name,
        metadata,
        *(Column(column, type_, primary_key=column in key) for column, type_ in columns),
    )


sessions = _table(
    "sessions",
    ("pk", _Key),
    ("id", Text),
    ("version", BigInteger),
    ("parent_session", Text),
    ("created_at", Text),
    ("header", Text),
    ("digest", LargeBinary),  # NULL only if written without one
    # A fork's shared history: its seq 1..base_seq are base_pk's (see lineage).
    ("base_pk", _Key),
    ("base_seq", BigInteger),
    key=("pk",),
)

entries = _table(
    "entries",
    ("session_pk", _Key),
    ("seq", BigInteger),
    ("entry_id", Text),
    ("type", Text),
    ("timestamp", Text),
    ("first_kept_id", Text),
    ("line", Text),
    ("digest", LargeBinary),
    key=("session_pk", "seq"),
)

journal_lines = _table(
    "journal_lines",
    ("journal", Text),
    ("seq", BigInteger),
    ("line", LargeBinary),
    key=("journal", "seq"),
)

journal_keys = _table(
    "journal_keys",
    ("journal", Text),
    ("key", _Sorted),  # a sealed store's: the key's token
    ("seq", BigInteger),
    key=("journal", "key", "seq"),
)

journal_unindexed = _table("journal_unindexed", ("journal", Text), key=("journal",))

heads = _table(
    "heads",
    ("name", Text),
    ("seq", BigInteger),
    ("session_id", Text),
    ("at", Text),
    key=("name", "seq"),
)

head_seals = _table(
    "head_seals", ("name", Text), ("seq", BigInteger), ("seal", Text), key=("name", "seq")
)

erasures = _table(
    "erasures",
    ("seq", _Key),
    ("kind", Text),
    ("name", Text),
    ("at", Text),
    ("reason", Text),
    ("lines", BigInteger),
    ("digest", Text),
    ("key", Text),  # the data key destroyed, in a sealed store (0008)
    ("keys", BigInteger),  # a drop of keyed lines: how many keys (0011)
    key=("seq",),
)

erasing = _table("erasing", ("erasure", _Key), key=("erasure",))

erasures_spent = _table("erasures_spent", ("erasure", _Key), key=("erasure",))

titles = _table(
    "titles",
    ("session_pk", _Key),
    ("seq", BigInteger),
    ("title", Text),  # None: back to the header's title
    ("at", Text),
    key=("session_pk", "seq"),
)

activity = _table(
    "activity", ("session_pk", _Key), ("tick", BigInteger), ("at", Text), key=("session_pk", "tick")
)

listing = _table(
    "listing",
    ("session_pk", _Key),
    ("session_id", _Sorted),
    ("owner", Text),
    ("created_at", _Sorted),
    ("created_tick", BigInteger),
    ("tick", BigInteger),
    ("at", Text),
    key=("session_pk",),
)

spent_ticks = _table("spent_ticks", ("tick", _Key), key=("tick",))

sealing = _table(
    "sealing",
    ("id", Integer),  # the one row: 1
    ("store_id", Text),
    ("scheme", Text),
    key=("id",),
)

search_postings = _table(
    "search_postings",
    ("word", Text),
    ("session_pk", _Key),
    ("batch", BigInteger),  # its first seq
    # The batch's messages holding the word, packed (sessionstore.backends.sql.postings).
    ("postings", LargeBinary),
    key=("word", "session_pk", "batch"),
)

search_mark = _table(
    "search_mark",
    ("id", Integer),  # the one row: 1
    ("indexed", _Key),  # every message of rowid <= this is indexed
    ("rule", Text),  # the word rule it was indexed with
    key=("id",),
)

search_vectors = _table(
    "search_vectors",
    ("session_pk", _Key),
    ("seq", BigInteger),
    ("words", TsVector()),  # NULL: too many words for a tsvector
    ("length", Integer),
    key=("session_pk", "seq"),
)

word_keys = _table("word_keys", ("bucket", BigInteger), ("key_id", LargeBinary), key=("bucket",))
