"""Search: a word index of every message (`sessionstore.backends.sql.wordindex`).

* SQLite: ``search_words``, one row per word of each message (``word``,
  ``session_pk``, ``seq``, its ``hits`` and the message's ``length``),
  without rowid, and ``search_mark``, its one row saying up to which rowid
  of ``entries`` the messages are indexed (appends index in batches past
  it) and with which word rule.
* PostgreSQL: ``search_vectors``, one ``tsvector`` of our words per message
  (NULL when it would pass PostgreSQL's 1 MB), its ``length``, and a GIN
  index on the vectors.

Every message already stored is indexed here, in place, with the same
functions the store uses; nothing already stored changes. These tables are
derived data, not history: no append-only triggers (an erase deletes a
session's rows from them with its entries).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

# The index must hold what the store would write: the same functions make it.
from sessionstore.backends.sql.tables import TsVector
from sessionstore.backends.sql.wordindex import RULE, indexed, message_of, vector

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_PAGE = 2000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.create_table(
            "search_vectors",
            sa.Column("session_pk", _KEY, nullable=False),
            sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
            sa.Column("words", TsVector(), nullable=True),
            sa.Column("length", sa.Integer(), nullable=False),
            sa.PrimaryKeyConstraint("session_pk", "seq", name="pk_search_vectors"),
        )
        _fill(
            bind,
            _vector_rows,
            "INSERT INTO search_vectors VALUES (:pk, :seq, CAST(:words AS tsvector), :length)",
        )
        # Built once filled: faster than growing it row by row.
        op.create_index(
            "ix_search_vectors_words", "search_vectors", ["words"], postgresql_using="gin"
        )
        op.create_index(
            "ix_search_vectors_unindexed",
            "search_vectors",
            ["session_pk", "seq"],
            postgresql_where=sa.text("words IS NULL"),
        )
        return
    op.create_table(
        "search_words",
        sa.Column("word", sa.Text(), nullable=False),
        sa.Column("session_pk", _KEY, nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("word", "session_pk", "seq", name="pk_search_words"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "search_mark",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("indexed", _KEY, nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_search_mark"),
    )
    top = bind.execute(sa.text("SELECT coalesce(max(rowid), 0) FROM entries")).scalar_one()
    _fill(bind, _word_rows, "INSERT INTO search_words VALUES (:word, :pk, :seq, :hits, :length)")
    bind.execute(
        sa.text("INSERT INTO search_mark VALUES (1, :top, :rule)"), {"top": top, "rule": RULE}
    )


def _fill(bind: sa.Connection, rows_of: Any, insert: str) -> None:
    """Index every message, a page of entries at a time (in key order)."""
    page = sa.text(
        "SELECT session_pk, seq, line FROM entries WHERE type = 'message' "
        "AND (session_pk, seq) > (:pk, :seq) ORDER BY session_pk, seq LIMIT :size"
    )
    at = {"pk": 0, "seq": 0, "size": _PAGE}
    while rows := bind.execute(page, at).all():
        made = [row for pk, seq, line in rows for row in rows_of(pk, seq, line)]
        if made:
            bind.execute(sa.text(insert), made)
        at = {"pk": rows[-1][0], "seq": rows[-1][1], "size": _PAGE}


def _word_rows(pk: int, seq: int, line: str) -> list[dict[str, Any]]:
    message = message_of(line)
    found = indexed(message) if message is not None else None
    if found is None:
        return []
    return [
        {"word": key, "pk": pk, "seq": seq, "hits": hits, "length": found.length}
        for key, hits in found.hits.items()
    ]


def _vector_rows(pk: int, seq: int, line: str) -> list[dict[str, Any]]:
    message = message_of(line)
    found = indexed(message) if message is not None else None
    if found is None:
        return []
    return [{"pk": pk, "seq": seq, "words": vector(found.hits), "length": found.length}]


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_search_vectors_unindexed", table_name="search_vectors")
        op.drop_index("ix_search_vectors_words", table_name="search_vectors")
        op.drop_table("search_vectors")
        return
    op.drop_table("search_mark")
    op.drop_table("search_words")
