"""The SQL tables, as the store's queries name them: columns and their types.

The migrations are the one definition of the schema (indexes, constraints,
the triggers that keep it append-only); these give each column the type
the queries bind it with, and ``tests/backends/sql/test_tables.py`` checks
them against a migrated database. What each table holds: docs/sql.md, Tables.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, Table, Text
from sqlalchemy.types import UserDefinedType


class TsVector(UserDefinedType[str]):
    """PostgreSQL's ``tsvector``, not imported from SQLAlchemy's dialect, whose
    import (about 65 ms) a process opening a SQLite store would pay for nothing."""

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
