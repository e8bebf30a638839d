"""Tamper evidence: no row replaced on SQLite, a chain of digests per session.

* SQLite: ``INSERT OR REPLACE`` and ``REPLACE INTO`` deleted the row in
  their way without firing the DELETE triggers (they fire for REPLACE only
  under ``recursive_triggers``), so raw SQL could rewrite history. A BEFORE
  INSERT trigger on each table now aborts any insert that meets an existing
  row.
* ``sessions.digest`` and ``entries.digest``: each session's chain of
  digests over its rows (`sessionstore.backends.sql.digests`), computed here for every
  row already stored, in place, with the no-update triggers lifted inside
  this transaction only.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# The chain must be the one the store writes: the same function computes it.
from sessionstore.backends.sql.digests import ENTRY_COLUMNS, entry_digest, header_digest

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# What makes an inserted row meet an existing one, per table.
_SAME_ROW = {
    "sessions": "pk = NEW.pk OR id = NEW.id",
    "entries": "session_pk = NEW.session_pk AND seq = NEW.seq",
    "journal_lines": "journal = NEW.journal AND seq = NEW.seq",
}
_PAGE = 2000


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite:
        for table, same in _SAME_ROW.items():
            op.execute(
                f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
                f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {same}) "
                f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"
            )
    op.add_column("sessions", sa.Column("digest", sa.LargeBinary(), nullable=True))
    op.add_column("entries", sa.Column("digest", sa.LargeBinary(), nullable=True))
    _lift_no_update(sqlite)
    _fill_digests(bind)
    _restore_no_update(sqlite)


def _lift_no_update(sqlite: bool) -> None:
    for table in ("sessions", "entries"):
        if sqlite:
            op.execute(f"DROP TRIGGER {table}_no_update")
        else:
            op.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_no_update")


def _restore_no_update(sqlite: bool) -> None:
    for table in ("sessions", "entries"):
        if sqlite:
            op.execute(
                f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"
            )
        else:
            op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {table}_no_update")


def _fill_digests(bind: sa.Connection) -> None:
    """Chain every stored session's digests, a page of rows at a time."""
    sessions = bind.execute(sa.text("SELECT pk, header FROM sessions ORDER BY pk")).all()
    set_session = sa.text("UPDATE sessions SET digest = :digest WHERE pk = :pk")
    set_entry = sa.text("UPDATE entries SET digest = :digest WHERE session_pk = :pk AND seq = :seq")
    page = sa.text(
        f"SELECT seq, {', '.join(ENTRY_COLUMNS)} FROM entries "
        "WHERE session_pk = :pk AND seq > :after ORDER BY seq LIMIT :size"
    )
    for pk, header in sessions:
        digest = header_digest(header)
        bind.execute(set_session, {"digest": digest, "pk": pk})
        done = 0
        while rows := bind.execute(page, {"pk": pk, "after": done, "size": _PAGE}).all():
            updates = []
            for seq, *columns in rows:
                digest = entry_digest(digest, dict(zip(ENTRY_COLUMNS, columns, strict=True)))
                updates.append({"digest": digest, "pk": pk, "seq": seq})
            bind.execute(set_entry, updates)
            done = rows[-1][0]


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        for table in _SAME_ROW:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_replace")
    op.drop_column("entries", "digest")
    op.drop_column("sessions", "digest")
