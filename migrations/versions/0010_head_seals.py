"""Sealed heads: what authenticates each position of a head in a sealed store.

``head_seals`` holds, for each row of ``heads`` a sealed store wrote, a
keyed hash (under the store's index key) of the head's name, the
position's ``seq``, the session it names and its time
(docs/encryption.md). A sealed store refuses a head's position that has
none, or one that does not match: a raw writer without the keys cannot
point a head at another session. A plain store writes none. Append-only
like ``heads``. The upgrade creates the empty table and changes nothing
stored; a sealed store's heads written before are authenticated once by
`SqlStore.seal_heads`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "head_seals",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("seal", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", "seq", name="pk_head_seals"),
    )
    refuse = "BEGIN SELECT RAISE(ABORT, 'sessionstore: head_seals is append-only'); END"
    for action in ("UPDATE", "DELETE"):
        name = f"head_seals_no_{action.lower()}"
        if postgres:
            op.execute(
                f"CREATE TRIGGER {name} BEFORE {action} ON head_seals "
                "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
            )
        else:
            op.execute(f"CREATE TRIGGER {name} BEFORE {action} ON head_seals " + refuse)
    if postgres:
        op.execute(
            "CREATE TRIGGER head_seals_no_truncate BEFORE TRUNCATE ON head_seals "
            "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_append_only()"
        )
    else:
        op.execute(
            "CREATE TRIGGER head_seals_no_replace BEFORE INSERT ON head_seals "
            "WHEN EXISTS (SELECT 1 FROM head_seals WHERE name = NEW.name AND seq = NEW.seq) "
            + refuse
        )


def downgrade() -> None:
    on = " ON head_seals" if op.get_bind().dialect.name == "postgresql" else ""
    for action in ("update", "delete", "truncate", "replace"):
        op.execute(f"DROP TRIGGER IF EXISTS head_seals_no_{action}{on}")
    op.drop_table("head_seals")
