"""Word keys: a sealed store's word tokens under a key per bucket of sessions.

``word_keys`` holds, in a sealed store, the id of each bucket's word key
(the key itself is in the keyring): a word's token is then its keyed hash
under the index key enciphered by the word key of its session's bucket,
and an erase replaces its bucket's key, so that a copy of the index taken
before the erase gives back none of the erased session's words
(docs/encryption.md). The upgrade creates the empty table. Tokens written
before stay as they are: the store's next open with its keys moves them
under word keys (`sessionstore.backends.sql.wordconvert`), which it
can do without reading a message.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "word_keys",
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("key_id", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("bucket", name="pk_word_keys"),
    )


def downgrade() -> None:
    op.drop_table("word_keys")
