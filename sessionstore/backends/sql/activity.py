"""Writes to sessions, counted: the ``activity`` log and each session's ``listing`` row.

Every transaction that writes to a session (creates, forks or imports it,
or appends lines) adds one ``activity`` row per session it wrote, in the
same transaction; its ``tick`` is drawn in the insert itself and never
given twice (`NextTick`). A trigger on ``activity`` moves the session's
``listing`` row to that tick in the same statement (migration 0005). A new
session's listing row is written here, from the header it was created with.

An append writes few pages for this (each a frame of SQLite's write-ahead
log, which is most of what a small transaction costs): the ``activity``
row in its session's part of one b-tree, the ``listing`` row and its
``tick`` index, and its owner's index when it has an owner.

A listing stands on a mark (`mark`): the newest tick when its first page
was read, every tick up to it committed and no later commit able to take
one. `sessionstore.backends.sql.browse` explains how a page uses it.
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

__all__ = ["NextTick", "listed", "mark", "touched"]


class NextTick(FunctionElement[int]):
    """The tick a write takes, drawn where it is inserted."""

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
    """A new session's first activity and its listing row (``meta``: its header)."""
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
    """One activity for each session ``pks`` names (written to, all at once)."""
    at = now_rfc3339()
    _INSERT.many(conn, [{"session_pk": pk, "at": at} for pk in pks])


def mark(conn: Connection) -> int:
    """The mark a new listing stands on: the newest tick of a session.

    On SQLite the writer is one at a time and the read a snapshot: every
    tick up to the newest it sees is committed, and a later write takes a
    greater one (`NextTick`, even when the session holding the newest was
    erased). On PostgreSQL ticks come from a sequence, drawn
    when each writer inserts, and writers commit in any order: the newest
    committed tick may have an older one still in flight, which would then
    commit below the mark, and a session written by it would take a place
    the listing already went past. So the mark is read under a SHARE lock
    on ``activity``, taken once its in-flight writers are done (each holds
    ROW EXCLUSIVE from before it draws a tick until it ends), and held only
    by this short transaction: writers that come meanwhile wait for it,
    then draw ticks above the mark, the sequence handing them out in time
    order (it keeps no cache). A writer's ``activity`` insert is the last
    lock it takes, so nothing it holds is one this waits on. The lock needs
    the privilege to write ``activity``, which the store's role has.
    """
    if conn.dialect.name == "postgresql":
        _WAIT_FOR_WRITERS.many(conn, [{}])
    return int(_LAST_TICK.scalar(conn))
