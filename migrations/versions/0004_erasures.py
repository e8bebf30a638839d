"""Erasures: a session or journal leaves only whole, and recorded.

* ``erasures``: the record each erasure leaves (kind, name, at, reason,
  lines, digest; ``seq`` gives their order), append-only like the other
  tables: no UPDATE or DELETE, on PostgreSQL no TRUNCATE, on SQLite no
  replacing INSERT.
* The DELETE triggers of ``sessions``, ``entries`` and ``journal_lines``
  still abort every DELETE, but for the rows of a session (or journal)
  whose erasure record was written in the same transaction. A raw
  ``DELETE`` still fails; UPDATE is refused as before. How a trigger knows
  "in the same transaction" differs:

  - PostgreSQL: the erasure's row was inserted by this transaction: its
    ``xmin`` is ``pg_current_xact_id()`` (the erase runs no savepoint, so
    the row carries the top-level transaction's id). Another transaction
    sees the committed record with an older ``xmin``, so an old erasure of
    the same id lets nothing through.
  - SQLite, which has no transaction id: a small table ``erasing``. The
    erase inserts its erasure's ``seq`` there (an insert is refused unless
    it names the newest erasure), deletes the rows, and empties
    ``erasing`` before it commits; the triggers let a row go only while
    ``erasing`` names an erasure of its session or journal. Outside an
    erase the table is empty, and a raw DELETE fails.

  Either way, whoever deletes rows by hand must write an erasure record
  for them first (on SQLite, and name it in ``erasing``): the deletion is
  recorded. Someone who can drop triggers can do anything; the digests
  and ``integrity()`` are the evidence then.

Nothing already stored changes: the upgrade creates a table and swaps
triggers, in place.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# Per table: the kind of erasure that lets its rows go, and (SQLite) the
# condition tying the erasure's name to the row being deleted.
_ERASABLE = {
    "sessions": ("session", "erasures.name = OLD.id"),
    "entries": (
        "session",
        "erasures.name = (SELECT id FROM sessions WHERE pk = OLD.session_pk)",
    ),
    "journal_lines": ("journal", "erasures.name = OLD.journal"),
}

_PG_ERASED_ONLY = """
CREATE FUNCTION sessionstore_erased_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    erased text;
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        erased := OLD.id;
    ELSIF TG_TABLE_NAME = 'entries' THEN
        erased := (SELECT id FROM sessions WHERE pk = OLD.session_pk);
    ELSE
        erased := OLD.journal;
    END IF;
    IF EXISTS (
        SELECT 1 FROM erasures
        WHERE kind = TG_ARGV[0] AND name = erased AND xmin = pg_current_xact_id()::xid
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'sessionstore: % is append-only', TG_TABLE_NAME;
END $$
"""


def _refuse(table: str) -> str:
    return f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "erasures",
        sa.Column("seq", _KEY, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("lines", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_erasures"),
    )
    op.create_index("ix_erasures_kind_name", "erasures", ["kind", "name"])
    if postgres:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER erasures_no_{action.lower()} BEFORE {action} ON erasures "
                "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
            )
        op.execute(
            "CREATE TRIGGER erasures_no_truncate BEFORE TRUNCATE ON erasures "
            "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_append_only()"
        )
        op.execute(_PG_ERASED_ONLY)
        for table, (kind, _) in _ERASABLE.items():
            op.execute(f"DROP TRIGGER {table}_no_delete ON {table}")
            op.execute(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION sessionstore_erased_only('{kind}')"
            )
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER erasures_no_{action.lower()} BEFORE {action} ON erasures "
            + _refuse("erasures")
        )
    op.execute(
        "CREATE TRIGGER erasures_no_replace BEFORE INSERT ON erasures "
        "WHEN EXISTS (SELECT 1 FROM erasures WHERE seq = NEW.seq) " + _refuse("erasures")
    )
    op.create_table(
        "erasing",
        sa.Column("erasure", _KEY, autoincrement=False, nullable=False),
        sa.ForeignKeyConstraint(["erasure"], ["erasures.seq"], name="fk_erasing_erasure_erasures"),
        sa.PrimaryKeyConstraint("erasure", name="pk_erasing"),
    )
    op.execute(
        "CREATE TRIGGER erasing_newest_only BEFORE INSERT ON erasing "
        "WHEN NEW.erasure IS NOT (SELECT max(seq) FROM erasures) "
        "BEGIN SELECT RAISE(ABORT, 'sessionstore: erasing names only the newest erasure'); END"
    )
    op.execute("CREATE TRIGGER erasing_no_update BEFORE UPDATE ON erasing " + _refuse("erasing"))
    for table, (kind, same) in _ERASABLE.items():
        op.execute(f"DROP TRIGGER {table}_no_delete")
        op.execute(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            "WHEN NOT EXISTS (SELECT 1 FROM erasing JOIN erasures ON erasures.seq = "
            f"erasing.erasure WHERE erasures.kind = '{kind}' AND {same}) " + _refuse(table)
        )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in _ERASABLE:
        if postgres:
            op.execute(f"DROP TRIGGER {table}_no_delete ON {table}")
            op.execute(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
            )
        else:
            op.execute(f"DROP TRIGGER {table}_no_delete")
            op.execute(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} " + _refuse(table)
            )
    if postgres:
        op.execute("DROP FUNCTION sessionstore_erased_only()")
        for action in ("update", "delete", "truncate"):
            op.execute(f"DROP TRIGGER IF EXISTS erasures_no_{action} ON erasures")
    else:
        for trigger in ("erasing_newest_only", "erasing_no_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.drop_table("erasing")
        for action in ("update", "delete", "replace"):
            op.execute(f"DROP TRIGGER IF EXISTS erasures_no_{action}")
    op.drop_index("ix_erasures_kind_name", table_name="erasures")
    op.drop_table("erasures")
