"""Keyed journal lines: an index, and a drop of some keys' lines, recorded.

* ``journal_keys``: a row per keyed journal line (one JSON object whose
  top-level ``"key"`` is a string, `sessionstore.wire.line_key`): its
  journal, its key and its ``seq``, so that a journal's lines under a key
  (an effect's, a checkpoint's) are found without reading the journal.
  Derived from ``journal_lines``, so not append-only. Every line already
  stored is indexed in place: an effect already done must be found as
  done, never run again. A sealed store's lines cannot be opened here (the
  migration has no keys): its journals are listed in ``journal_unindexed``,
  and the first open with the keys indexes them (by the keys' tokens).
* ``erasures.keys``: a drop (`JournalBase.drop`) removes the lines of some
  keys from a journal that stays, recorded by an erasure of kind
  ``journal`` whose ``keys`` says how many keys' lines went (NULL for a
  whole erasure). The DELETE triggers already let a journal's rows go only
  in the transaction of an erasure naming it; the "whole" check (0007) now
  holds for whole erasures only.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

from sessionstore.wire import line_key

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SORTED = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")  # code point order
_BATCH = 1000

# The erasure's session, or a line of its journal, still there.
_STILL_THERE = (
    "({e}.kind = 'session' AND EXISTS (SELECT 1 FROM sessions WHERE id = {e}.name)) "
    "OR ({e}.kind = 'journal' AND {whole} "
    "AND EXISTS (SELECT 1 FROM journal_lines WHERE journal = {e}.name))"
)

_PG_WHOLE = """
CREATE OR REPLACE FUNCTION sessionstore_erased_whole() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {still} THEN
        RAISE EXCEPTION 'sessionstore: the % % is still there: an erasure removes all of it',
            NEW.kind, NEW.name;
    END IF;
    RETURN NULL;
END $$
"""

_SQLITE_WHOLE = (
    "CREATE TRIGGER erasing_whole BEFORE DELETE ON erasing "
    "WHEN EXISTS (SELECT 1 FROM erasures e WHERE e.seq = OLD.erasure AND ({still})) "
    "BEGIN SELECT RAISE(ABORT, "
    "'sessionstore: an erasure removes all of its session or journal'); END"
)


def _whole(dropped: bool) -> tuple[str, str]:
    """The "whole" checks, PostgreSQL's and SQLite's: with ``dropped``, a
    journal erasure that records a drop (``keys``) is exempt."""
    pg = _STILL_THERE.format(e="NEW", whole="NEW.keys IS NULL" if dropped else "TRUE")
    lite = _STILL_THERE.format(e="e", whole="e.keys IS NULL" if dropped else "1")
    return _PG_WHOLE.format(still=pg), _SQLITE_WHOLE.format(still=lite)


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    op.add_column("erasures", sa.Column("keys", sa.BigInteger(), nullable=True))
    pg_whole, sqlite_whole = _whole(dropped=True)
    if postgres:
        op.execute(pg_whole)
    else:
        op.execute("DROP TRIGGER erasing_whole")
        op.execute(sqlite_whole)
    op.create_table(
        "journal_keys",
        sa.Column("journal", sa.Text(), nullable=False),
        sa.Column("key", _SORTED, nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("journal", "key", "seq", name="pk_journal_keys"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "journal_unindexed",
        sa.Column("journal", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("journal", name="pk_journal_unindexed"),
    )
    if bind.execute(sa.text("SELECT 1 FROM sealing")).first() is not None:
        bind.execute(
            sa.text(
                "INSERT INTO journal_unindexed (journal) "
                "SELECT DISTINCT journal FROM journal_lines WHERE line IS NOT NULL"
            )
        )
        return
    insert = sa.text("INSERT INTO journal_keys (journal, key, seq) VALUES (:journal, :key, :seq)")
    for rows in _keyed_rows(bind):
        bind.execute(insert, rows)


def _keyed_rows(bind: sa.Connection) -> Iterator[list[dict[str, object]]]:
    """The index's rows for every keyed line stored, a batch at a time."""
    rows = bind.execute(
        sa.text("SELECT journal, seq, line FROM journal_lines WHERE line IS NOT NULL")
    )
    batch: list[dict[str, object]] = []
    for journal, seq, line in rows:
        key = line_key(line)
        if key is not None:
            batch.append({"journal": journal, "key": key, "seq": seq})
            if len(batch) >= _BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def downgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT 1 FROM erasures WHERE keys IS NOT NULL")).first() is not None:
        raise RuntimeError(
            "sessionstore: this database recorded drops of keyed journal lines, "
            "which revision 0010 cannot tell from whole erasures; not downgraded"
        )
    op.drop_table("journal_unindexed")
    op.drop_table("journal_keys")
    pg_whole, sqlite_whole = _whole(dropped=False)
    if bind.dialect.name == "postgresql":
        op.execute(pg_whole)
    else:
        op.execute("DROP TRIGGER erasing_whole")
        op.execute(sqlite_whole)
    op.drop_column("erasures", "keys")
