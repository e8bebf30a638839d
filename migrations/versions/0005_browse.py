"""Browsing: titles chosen later, and what a page of summaries is read from.

* ``titles``: every `TitleChange` of a session, ``seq`` = 1, 2, 3... per
  session; append-only like ``heads``.
* ``activity``: one row per write to a session (its creation, fork or
  import, a transaction of appends that stored lines), keyed by session
  and ``tick``: ticks count writes across the database and are never given
  twice. On PostgreSQL they come from the sequence ``activity_ticks``
  (without a cache, so they are drawn in time order); on SQLite, whose
  writers take turns, a write takes one past the greatest tick in
  ``listing`` and ``spent_ticks``, a table that keeps the last tick of an
  erased session when it is the greatest yet. ``at`` is the write's time.
  Append-only; on SQLite without a rowid, so that an append writes one
  b-tree of it.
* ``listing``: one row per session: its id, and the ``owner`` and
  ``created_at`` its header gives (decoded by the wire decoder, which skips
  an ill-typed field, never by SQL's JSON functions), the ``created_tick``
  of its first activity, and the ``tick`` and ``at`` of its last. A trigger
  on ``activity`` moves them ahead in the same statement; a trigger on
  ``listing`` refuses any other UPDATE (another column, or a tick that
  goes back). Its owner indexes are partial (``owner IS NOT NULL``).

Rows of all three leave only in their session's erasure, as the rows of
``sessions`` and ``entries`` (0004): on PostgreSQL
``sessionstore_erased_only`` now finds the session of any table keyed by
``session_pk``; on SQLite the DELETE triggers look in ``erasing``. No
TRUNCATE (PostgreSQL), no replacing INSERT (SQLite).

A populated database is upgraded in place: each session stored before gets
its listing row and one activity row. When the store last wrote to it was
never recorded, so its ticks follow what its rows say: the later of the
header's ``created_at`` and its last entry's ``timestamp`` (a fork's last
shared one when it has none of its own), read as ISO 8601 (UTC when no
offset is given; a text that is not a time counts as the oldest), then its
``pk``. Its activity's ``at`` is the time of the upgrade.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from sessionstore.errors import InvalidRecordError
from sessionstore.timestamps import now_rfc3339
from sessionstore.wire.stored import read_stored_meta

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_SORTED = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")  # code point order
_TABLES = ("titles", "activity", "listing")  # each keyed by session_pk
_SAME_ROW = {  # what makes an inserted row meet an existing one (SQLite)
    "titles": "session_pk = NEW.session_pk AND seq = NEW.seq",
    "activity": "session_pk = NEW.session_pk AND tick = NEW.tick",
    "listing": "session_pk = NEW.session_pk",
    "spent_ticks": "tick = NEW.tick",
}
_OWNED = sa.text("owner IS NOT NULL")
# The one UPDATE of listing: its last tick and time, to a later tick.
_FIXED = ("session_pk", "session_id", "owner", "created_at", "created_tick")


def _not_moved_ahead(differs: str) -> str:
    """The condition of an UPDATE of listing that does more than move it ahead."""
    return " OR ".join([*(f"NEW.{c} {differs} OLD.{c}" for c in _FIXED), "NEW.tick <= OLD.tick"])


_PAGE = 2000

_PG_ERASED_ONLY = """
CREATE OR REPLACE FUNCTION sessionstore_erased_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    erased text;
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        erased := OLD.id;
    ELSIF TG_TABLE_NAME = 'journal_lines' THEN
        erased := OLD.journal;
    ELSE
        erased := (SELECT id FROM sessions WHERE pk = OLD.session_pk);
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

# 0004's, put back by the downgrade.
_PG_ERASED_ONLY_0004 = """
CREATE OR REPLACE FUNCTION sessionstore_erased_only() RETURNS trigger LANGUAGE plpgsql AS $$
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

_PG_TOUCH = """
CREATE FUNCTION sessionstore_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE listing SET tick = NEW.tick, at = NEW.at WHERE session_pk = NEW.session_pk;
    RETURN NULL;
END $$
"""

_SQLITE_TOUCH = (
    "CREATE TRIGGER activity_touch AFTER INSERT ON activity BEGIN "
    "UPDATE listing SET tick = NEW.tick, at = NEW.at WHERE session_pk = NEW.session_pk; END"
)


def _refuse(table: str) -> str:
    return f"BEGIN SELECT RAISE(ABORT, 'sessionstore: {table} is append-only'); END"


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    _create_tables()
    _fill(bind, postgres)
    if postgres:
        _pg_triggers()
    else:
        _sqlite_triggers()


def _create_tables() -> None:
    op.create_table(
        "titles",
        sa.Column("session_pk", _KEY, nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("at", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name="fk_titles_session_pk_sessions"
        ),
        sa.PrimaryKeyConstraint("session_pk", "seq", name="pk_titles"),
    )
    op.create_table(
        "activity",
        sa.Column("session_pk", _KEY, nullable=False),
        sa.Column("tick", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("at", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name="fk_activity_session_pk_sessions"
        ),
        sa.PrimaryKeyConstraint("session_pk", "tick", name="pk_activity"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "listing",
        sa.Column("session_pk", _KEY, autoincrement=False, nullable=False),
        sa.Column("session_id", _SORTED, nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("created_at", _SORTED, nullable=False),
        sa.Column("created_tick", sa.BigInteger(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name="fk_listing_session_pk_sessions"
        ),
        sa.PrimaryKeyConstraint("session_pk", name="pk_listing"),
    )
    op.create_index("ix_listing_tick", "listing", ["tick"])
    op.create_index(
        "ix_listing_owner_tick",
        "listing",
        ["owner", "tick"],
        sqlite_where=_OWNED,
        postgresql_where=_OWNED,
    )
    op.create_index("ix_listing_created_at_session_id", "listing", ["created_at", "session_id"])
    op.create_index(
        "ix_listing_owner_created_at_session_id",
        "listing",
        ["owner", "created_at", "session_id"],
        sqlite_where=_OWNED,
        postgresql_where=_OWNED,
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE SEQUENCE activity_ticks")  # CACHE 1: drawn in time order
    else:
        op.create_table(
            "spent_ticks",
            sa.Column("tick", _KEY, autoincrement=False, nullable=False),
            sa.PrimaryKeyConstraint("tick", name="pk_spent_ticks"),
        )


# ---------------------------------------------------------------- the sessions already stored


def _fill(bind: sa.Connection, postgres: bool) -> None:
    """A listing row and one activity row for every session stored before."""
    found = list(_stored(bind))
    found.sort(key=lambda session: session[0])
    at = now_rfc3339()
    listing, activity = [], []
    for tick, (_, pk, session_id, owner, created_at) in enumerate(found, 1):
        activity.append({"tick": tick, "session_pk": pk, "at": at})
        listing.append(
            {
                "session_pk": pk,
                "session_id": session_id,
                "owner": owner,
                "created_at": created_at,
                "created_tick": tick,
                "tick": tick,
                "at": at,
            }
        )
    insert_activity = sa.text(
        "INSERT INTO activity (tick, session_pk, at) VALUES (:tick, :session_pk, :at)"
    )
    insert_listing = sa.text(
        "INSERT INTO listing (session_pk, session_id, owner, created_at, created_tick, tick, at) "
        "VALUES (:session_pk, :session_id, :owner, :created_at, :created_tick, :tick, :at)"
    )
    for start in range(0, len(found), _PAGE):
        bind.execute(insert_activity, activity[start : start + _PAGE])
        bind.execute(insert_listing, listing[start : start + _PAGE])
    if postgres and found:  # ticks given by hand: the sequence goes on after them
        bind.execute(sa.text("SELECT setval('activity_ticks', :last)"), {"last": len(found)})


def _stored(bind: sa.Connection) -> Iterator[tuple[tuple[Any, ...], int, str, str | None, str]]:
    """``(order, pk, id, owner, created_at)`` of every session, ``order``
    being when it was last written to, as far as its rows tell."""
    last_own = (
        "SELECT timestamp FROM entries WHERE session_pk = sessions.pk ORDER BY seq DESC LIMIT 1"
    )
    shared = (
        "SELECT timestamp FROM entries "
        "WHERE session_pk = sessions.base_pk AND seq = sessions.base_seq"
    )
    rows = bind.execute(
        sa.text(
            f"SELECT pk, id, header, created_at, coalesce(({last_own}), ({shared})) "
            "FROM sessions ORDER BY pk"
        )
    )
    for pk, session_id, header, created_at, last_timestamp in rows:
        owner = None
        try:
            meta = read_stored_meta(header)
        except InvalidRecordError:  # listed all the same; its summary says why
            pass
        else:
            owner, created_at = meta.owner, meta.created_at
        times = [t for t in map(_instant, (created_at, last_timestamp)) if t is not None]
        order = (1, max(times), pk) if times else (0, pk)
        yield order, pk, session_id, owner, created_at


def _instant(text: str | None) -> float | None:
    """The instant an ISO 8601 text names (UTC when it gives no offset), or None."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


# ---------------------------------------------------------------- triggers


def _sqlite_triggers() -> None:
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER spent_ticks_no_{action.lower()} BEFORE {action} ON spent_ticks "
            + _refuse("spent_ticks")
        )
    op.execute(
        "CREATE TRIGGER spent_ticks_no_replace BEFORE INSERT ON spent_ticks "
        f"WHEN EXISTS (SELECT 1 FROM spent_ticks WHERE {_SAME_ROW['spent_ticks']}) "
        + _refuse("spent_ticks")
    )
    of_session = "(SELECT id FROM sessions WHERE pk = OLD.session_pk)"
    for table in _TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            "WHEN NOT EXISTS (SELECT 1 FROM erasing JOIN erasures ON erasures.seq = "
            f"erasing.erasure WHERE erasures.kind = 'session' AND erasures.name = {of_session}) "
            + _refuse(table)
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
            f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {_SAME_ROW[table]}) " + _refuse(table)
        )
    for table in ("titles", "activity"):
        op.execute(f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} " + _refuse(table))
    op.execute(
        "CREATE TRIGGER listing_no_update BEFORE UPDATE ON listing "
        f"WHEN {_not_moved_ahead('IS NOT')} " + _refuse("listing")
    )
    op.execute(_SQLITE_TOUCH)


def _pg_triggers() -> None:
    op.execute(_PG_ERASED_ONLY)
    for table in _TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION sessionstore_erased_only('session')"
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_append_only()"
        )
    for table in ("titles", "activity"):
        op.execute(
            f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION sessionstore_append_only()"
        )
    op.execute(
        f"CREATE TRIGGER listing_no_update BEFORE UPDATE ON listing FOR EACH ROW "
        f"WHEN ({_not_moved_ahead('IS DISTINCT FROM')}) "
        "EXECUTE FUNCTION sessionstore_append_only()"
    )
    op.execute(_PG_TOUCH)
    op.execute(
        "CREATE TRIGGER activity_touch AFTER INSERT ON activity "
        "FOR EACH ROW EXECUTE FUNCTION sessionstore_touch()"
    )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in _TABLES:
        on = f" ON {table}" if postgres else ""
        for action in ("update", "delete", "truncate", "replace"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{action}{on}")
    op.execute("DROP TRIGGER IF EXISTS activity_touch" + (" ON activity" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION sessionstore_touch()")
        op.execute(_PG_ERASED_ONLY_0004)
        op.execute("DROP SEQUENCE activity_ticks")
    else:
        for action in ("update", "delete", "replace"):
            op.execute(f"DROP TRIGGER IF EXISTS spent_ticks_no_{action}")
        op.drop_table("spent_ticks")
    op.drop_index("ix_listing_owner_created_at_session_id", table_name="listing")
    op.drop_index("ix_listing_created_at_session_id", table_name="listing")
    op.drop_index("ix_listing_owner_tick", table_name="listing")
    op.drop_index("ix_listing_tick", table_name="listing")
    op.drop_table("listing")
    op.drop_table("activity")
    op.drop_table("titles")
