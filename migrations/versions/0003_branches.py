"""Branches: forks that share their source's rows, and named heads.

* ``sessions.base_pk`` and ``sessions.base_seq``: a fork made by
  `SqlStore.fork` stores no entry of its own for the history it shares: its
  entries ``seq`` 1..``base_seq`` are read from ``base_pk``'s (and, through
  it, its ancestors'), and its own rows continue at ``base_seq + 1``. Both
  are NULL for every session that is not such a fork, which is every
  session stored before this revision: nothing already stored changes.
* ``heads``: every position a named head ever had, append-only like the
  other tables (no UPDATE, DELETE or TRUNCATE; on SQLite no replacing
  INSERT).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.add_column("sessions", sa.Column("base_pk", _KEY, nullable=True))
        op.create_foreign_key(
            "fk_sessions_base_pk_sessions", "sessions", "sessions", ["base_pk"], ["pk"]
        )
    else:
        # SQLite adds a column with a foreign key in place when its default
        # is NULL: the column is NULL in every row already there.
        op.execute("ALTER TABLE sessions ADD COLUMN base_pk INTEGER REFERENCES sessions (pk)")
    op.add_column("sessions", sa.Column("base_seq", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_sessions_base_pk",
        "sessions",
        ["base_pk"],
        sqlite_where=sa.text("base_pk IS NOT NULL"),
        postgresql_where=sa.text("base_pk IS NOT NULL"),
    )
    op.create_table(
        "heads",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", "seq", name="pk_heads"),
    )
    for action in ("UPDATE", "DELETE"):
        name = f"heads_no_{action.lower()}"
        if postgres:
            op.execute(
                f"CREATE TRIGGER {name} BEFORE {action} ON heads "
                "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
            )
        else:
            op.execute(
                f"CREATE TRIGGER {name} BEFORE {action} ON heads "
                "BEGIN SELECT RAISE(ABORT, 'sessionstore: heads is append-only'); END"
            )
    if postgres:
        op.execute(
            "CREATE TRIGGER heads_no_truncate BEFORE TRUNCATE ON heads "
            "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_append_only()"
        )
    else:
        op.execute(
            "CREATE TRIGGER heads_no_replace BEFORE INSERT ON heads "
            "WHEN EXISTS (SELECT 1 FROM heads WHERE name = NEW.name AND seq = NEW.seq) "
            "BEGIN SELECT RAISE(ABORT, 'sessionstore: heads is append-only'); END"
        )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    on = " ON heads" if postgres else ""
    for action in ("update", "delete", "truncate", "replace"):
        op.execute(f"DROP TRIGGER IF EXISTS heads_no_{action}{on}")
    op.drop_table("heads")
    op.drop_index("ix_sessions_base_pk", table_name="sessions")
    if postgres:
        op.drop_constraint("fk_sessions_base_pk_sessions", "sessions", type_="foreignkey")
    op.drop_column("sessions", "base_seq")
    op.drop_column("sessions", "base_pk")
