"""Whole erasures: an erasure record lets rows go only once, and only all of them.

Until now the DELETE triggers let any subset of a session's (or journal's)
rows go in the transaction that wrote an erasure record naming it. Two
raw writes went unseen: on SQLite, naming an *old* erasure in ``erasing``
(one whose id was created again since) deleted rows with no new record;
on either database, a new record let a session lose its last entries and
stay listed. Now:

* PostgreSQL: a constraint trigger, deferred to the commit, refuses any
  transaction that recorded an erasure while the session (or any line of
  the journal) it names is still there.
* SQLite: an erasure named in ``erasing`` is *spent* when it leaves it
  (``erasures_spent``, append-only), and a spent erasure cannot be named
  again; it can leave only once its session's row (or every line of its
  journal) is gone. A transaction that leaves ``erasing`` filled is
  reported by ``integrity()``.

Every erasure already recorded is marked spent. Nothing stored changes:
the upgrade creates a table and adds triggers, in place.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The erasure's session, or a line of its journal, still there.
_STILL_THERE = (
    "({e}.kind = 'session' AND EXISTS (SELECT 1 FROM sessions WHERE id = {e}.name)) "
    "OR ({e}.kind = 'journal' AND EXISTS (SELECT 1 FROM journal_lines WHERE journal = {e}.name))"
)

_PG_WHOLE = f"""
CREATE FUNCTION sessionstore_erased_whole() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {_STILL_THERE.format(e="NEW")} THEN
        RAISE EXCEPTION 'sessionstore: the % % is still there: an erasure removes all of it',
            NEW.kind, NEW.name;
    END IF;
    RETURN NULL;
END $$
"""

_NEWEST_UNSPENT = (
    "CREATE TRIGGER erasing_newest_only BEFORE INSERT ON erasing "
    "WHEN NEW.erasure IS NOT (SELECT max(seq) FROM erasures) "
    "OR EXISTS (SELECT 1 FROM erasures_spent WHERE erasure = NEW.erasure) "
    "BEGIN SELECT RAISE(ABORT, "
    "'sessionstore: erasing names only the newest erasure, and only once'); END"
)
_NEWEST = (
    "CREATE TRIGGER erasing_newest_only BEFORE INSERT ON erasing "
    "WHEN NEW.erasure IS NOT (SELECT max(seq) FROM erasures) "
    "BEGIN SELECT RAISE(ABORT, 'sessionstore: erasing names only the newest erasure'); END"
)


def _refuse(table: str) -> str:
    return f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_WHOLE)
        op.execute(
            "CREATE CONSTRAINT TRIGGER erasures_whole AFTER INSERT ON erasures "
            "DEFERRABLE INITIALLY DEFERRED "
            "FOR EACH ROW EXECUTE FUNCTION sessionstore_erased_whole()"
        )
        return
    op.create_table(
        "erasures_spent",
        sa.Column("erasure", _KEY, autoincrement=False, nullable=False),
        sa.ForeignKeyConstraint(
            ["erasure"], ["erasures.seq"], name="fk_erasures_spent_erasure_erasures"
        ),
        sa.PrimaryKeyConstraint("erasure", name="pk_erasures_spent"),
    )
    op.execute("INSERT INTO erasures_spent (erasure) SELECT seq FROM erasures")
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER erasures_spent_no_{action.lower()} BEFORE {action} "
            "ON erasures_spent " + _refuse("erasures_spent")
        )
    op.execute(
        "CREATE TRIGGER erasures_spent_no_replace BEFORE INSERT ON erasures_spent "
        "WHEN EXISTS (SELECT 1 FROM erasures_spent WHERE erasure = NEW.erasure) "
        + _refuse("erasures_spent")
    )
    op.execute("DROP TRIGGER erasing_newest_only")
    op.execute(_NEWEST_UNSPENT)
    op.execute(
        "CREATE TRIGGER erasing_whole BEFORE DELETE ON erasing "
        "WHEN EXISTS (SELECT 1 FROM erasures e WHERE e.seq = OLD.erasure AND ("
        + _STILL_THERE.format(e="e")
        + ")) BEGIN SELECT RAISE(ABORT, "
        "'sessionstore: an erasure removes all of its session or journal'); END"
    )
    op.execute(
        "CREATE TRIGGER erasing_spent AFTER DELETE ON erasing "
        "BEGIN INSERT INTO erasures_spent (erasure) VALUES (OLD.erasure); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER erasures_whole ON erasures")
        op.execute("DROP FUNCTION sessionstore_erased_whole()")
        return
    for trigger in ("erasing_spent", "erasing_whole", "erasing_newest_only"):
        op.execute(f"DROP TRIGGER {trigger}")
    op.execute(_NEWEST)
    for action in ("update", "delete", "replace"):
        op.execute(f"DROP TRIGGER erasures_spent_no_{action}")
    op.drop_table("erasures_spent")
