"""Encryption at rest: the row that says a store is sealed, and by which keyring.

``sealing`` holds at most one row, written when a store is first opened
with keys (docs/encryption.md): the store's id, which its keyring must
serve, and the cipher scheme. A store with no row is plain, as every store
was before: the upgrade creates the empty table, in place, and changes
nothing stored. The row is append-only like the log: a sealed store never
becomes plain by a raw write.

``erasures`` gains ``key``: in a sealed store, the id of the data key an
erasure destroyed; NULL in every record made before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("erasures", sa.Column("key", sa.Text(), nullable=True))
    op.create_table(
        "sealing",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("store_id", sa.Text(), nullable=False),
        sa.Column("scheme", sa.Text(), nullable=False),
        sa.CheckConstraint("id = 1", name="ck_sealing_one_row"),
        sa.PrimaryKeyConstraint("id", name="pk_sealing"),
    )
    if op.get_bind().dialect.name == "postgresql":
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER sealing_no_{action.lower()} BEFORE {action} ON sealing "
                "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
            )
        op.execute(
            "CREATE TRIGGER sealing_no_truncate BEFORE TRUNCATE ON sealing "
            "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_append_only()"
        )
        return
    refuse = "BEGIN SELECT RAISE(ABORT, 'sessionstore: sealing is append-only'); END"
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER sealing_no_{action.lower()} BEFORE {action} ON sealing " + refuse
        )
    op.execute(
        "CREATE TRIGGER sealing_no_replace BEFORE INSERT ON sealing "
        "WHEN EXISTS (SELECT 1 FROM sealing) " + refuse
    )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    actions = ("update", "delete", "truncate") if postgres else ("update", "delete", "replace")
    for action in actions:
        op.execute(f"DROP TRIGGER sealing_no_{action}" + (" ON sealing" if postgres else ""))
    op.drop_table("sealing")
    op.drop_column("erasures", "key")
