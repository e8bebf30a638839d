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
    op.create_index("ix_entries_entry_id", "entries", ["session_pk", "entry_id"])
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
    for table in TABLES:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"
            )


def downgrade() -> None:
    for table in reversed(TABLES):
        for action in ("update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{action}")
        op.drop_table(table)
