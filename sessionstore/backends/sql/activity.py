"""Writes to sessions, counted: the ``activity`` log and each session's ``listing`` row.

Each transaction writing to a session adds an ``activity`` row, its tick
drawn in the insert and never given twice; a trigger moves the session's
``listing`` row to it (0005). A listing stands on a `mark`. docs/sql.md, Browse.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import BigInteger, Connection, bindparam, func, insert, select, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import activity, listing
from sessionstore.models import SessionMeta
from sessionstore.timestamps import now_rfc3339


class NextTick(FunctionElement[int]):
    type = BigInteger()
    inherit_cache = True


@compiles(NextTick, "postgresql")
def _next_tick_postgresql(element: NextTick, compiler: SQLCompiler, **kw: Any) -> str:
    return "nextval('activity_ticks')"


@compiles(NextTick, "sqlite")
def _next_tick_sqlite(element: NextTick, compiler: SQLCompiler, **kw: Any) -> str:
    # One writer at a time: one past every tick given. A session's last tick
    # is in listing until it is erased, and then in spent_ticks if it was
    # the greatest (an AUTOINCREMENT would write its counter on every append).
    return (
        "(SELECT max((SELECT coalesce(max(tick), 0) FROM listing), "
        "(SELECT coalesce(max(tick), 0) FROM spent_ticks)) + 1)"
    )


_write = insert(activity).values(
    session_pk=bindparam("session_pk"), tick=NextTick(), at=bindparam("at")
)
_INSERT = Query(_write)
_INSERT_TICK = Query(_write.returning(activity.c.tick))
_INSERT_LISTING = Query(insert(listing))
_LAST_TICK = Query(select(func.coalesce(func.max(listing.c.tick), 0)))
# SHARE conflicts with the ROW EXCLUSIVE lock every INSERT into activity
# takes before it draws its tick, and holds until it ends.
_WAIT_FOR_WRITERS = Query(text("LOCK TABLE activity IN SHARE MODE"))


def listed(conn: Connection, *, pk: int, meta: SessionMeta) -> None:
    at = now_rfc3339()
    tick = _INSERT_TICK.scalar(conn, session_pk=pk, at=at)
    row = {
        "session_pk": pk,
        "session_id": meta.id,
        "owner": meta.owner,
        "created_at": meta.created_at,
        "created_tick": tick,
        "tick": tick,
        "at": at,
    }
    _INSERT_LISTING.many(conn, [row])


def touched(conn: Connection, pks: Collection[int]) -> None:
    at = now_rfc3339()
    _INSERT.many(conn, [{"session_pk": pk, "at": at} for pk in pks])


def mark(conn: Connection) -> int:
    """The mark a new listing stands on: the newest tick. On PostgreSQL, whose
    writers commit ticks in any order, read under a SHARE lock that waits
    for those in flight (docs/sql.md, Browse); a writer's ``activity``
    insert is the last lock it takes, so nothing it holds is one this waits on."""
    if conn.dialect.name == "postgresql":
        _WAIT_FOR_WRITERS.many(conn, [{}])
    return int(_LAST_TICK.scalar(conn))
