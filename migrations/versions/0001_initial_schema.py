"""The initial schema: sessions, entries, journal lines, append-only triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("sessions", "entries", "journal_lines")
_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("pk", _KEY, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("parent_session", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.Column("header", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name="pk_sessions"),
        sa.UniqueConstraint("id", name="uq_sessions_id"),
    )
    op.create_table(
        "entries",
        sa.Column("session_pk", _KEY, nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("entry_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.Text(), nullable=False),
        sa.Column("first_kept_id", sa.Text(), nullable=True),
        sa.Column("line", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name="fk_entries_session_pk_sessions"
        ),
        sa.PrimaryKeyConstraint("session_pk", "seq", name="pk_entries"),
    )
    op.create_index("ix_entries_entry_id", "entries", ["session_pk", "entry_id", "seq"])
    op.create_index(
        "ix_entries_compactions",
        "entries",
        ["session_pk", "seq"],
        sqlite_where=sa.text("type = 'compaction'"),
        postgresql_where=sa.text("type = 'compaction'"),
    )
    op.create_table(
        "journal_lines",
        sa.Column("journal", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("line", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("journal", "seq", name="pk_journal_lines"),
    )
    op.create_index(
        "ix_journal_lines_clears",
        "journal_lines",
        ["journal", "seq"],
        sqlite_where=sa.text("line IS NULL"),
        postgresql_where=sa.text("line IS NULL"),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute(
            "CREATE FUNCTION sessionstore_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'sessionstore: % is append-only', TG_TABLE_NAME; END $$"
        )
    for table in TABLES:
        for action in ("UPDATE", "DELETE"):
            name = f"{table}_no_{action.lower()}"
            if postgres:
                op.execute(
                    f"CREATE TRIGGER {name} BEFORE {action} ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
                )
            else:
                op.execute(
                    f"CREATE TRIGGER {name} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"
                )
        if postgres:
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_append_only()"
            )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in reversed(TABLES):
        for action in ("update", "delete", "truncate"):
            on = f" ON {table}" if postgres else ""
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{action}{on}")
        op.drop_table(table)
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS sessionstore_append_only()")
