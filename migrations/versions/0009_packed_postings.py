"""SQLite's word index packed: ``search_postings`` replaces ``search_words``.

``search_words`` held a row per word of each message (some 19 bytes a
word: more than the line itself). ``search_postings`` holds a row per word
of each session's batch of messages indexed together, the messages holding
it packed as varints (`sessionstore.backends.sql.postings`): about 3 bytes
a word. The rows are converted as they are, not rebuilt from the lines (in
a sealed store the lines need its keys; the rows hold the words' tokens
already), a session's messages grouped by 256 ``seq`` at a time (`postings.BATCH`); the mark,
its rule and every stored line are left as they were. PostgreSQL, whose
index is ``search_vectors``, is not touched.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby

import sqlalchemy as sa
from alembic import op

from sessionstore.backends.sql.postings import BATCH, LENGTHS, packed_rows, unpack

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        return
    op.create_table(
        "search_postings",
        sa.Column("word", sa.Text(), nullable=False),
        sa.Column("session_pk", _KEY, nullable=False),
        sa.Column("batch", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("postings", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("word", "session_pk", "batch", name="pk_search_postings"),
        sqlite_with_rowid=False,
    )
    insert = sa.text("INSERT INTO search_postings VALUES (:word, :pk, :batch, :postings)")
    for made in _batches(bind):
        rows = [{"word": w, "pk": pk, "batch": b, "postings": p} for w, pk, b, p in made]
        bind.execute(insert, rows)
    op.drop_table("search_words")


def _batches(bind: sa.Connection) -> Iterator[list[tuple[str, int, int, bytes]]]:
    """The packed rows of ``search_words``, a batch of a session at a time."""
    rows = bind.execute(
        sa.text(
            "SELECT session_pk, seq, word, hits, length FROM search_words "
            "ORDER BY session_pk, seq, word"
        )
    )
    for _, group in groupby(rows, key=lambda row: (row[0], (row[1] - 1) // BATCH)):
        messages = []
        for (pk, seq), words in groupby(group, key=lambda row: (row[0], row[1])):
            found = list(words)
            messages.append((pk, seq, {row[2]: row[3] for row in found}, found[0][4]))
        yield packed_rows(messages)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
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
    insert = sa.text("INSERT INTO search_words VALUES (:word, :pk, :seq, :hits, :length)")
    rows = bind.execute(
        sa.text(
            "SELECT session_pk, batch, word, postings FROM search_postings "
            "ORDER BY session_pk, batch, word"
        )
    )
    for (pk, batch), group in groupby(rows, key=lambda row: (row[0], row[1])):
        lengths: dict[int, int] = {}
        made = []
        for _, _, word, blob in group:
            if word == LENGTHS:
                lengths = dict(unpack(blob, batch))
                continue
            for seq, hits in unpack(blob, batch):
                made.append({"word": word, "pk": pk, "seq": seq, "hits": hits})
        for row in made:
            row["length"] = lengths.get(row["seq"], 0)
        if made:
            bind.execute(insert, made)
    op.drop_table("search_postings")
