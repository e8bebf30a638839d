"""A page of `summaries` on SQL, read from the ``listing`` table's indexes.

A listing stands on a mark (`activity.mark`), carried in every cursor, and
a session's place is where it stood then: its last tick up to the mark
(looked up in ``activity`` for one written to since) or its
``(created_at, id)``; one created after the mark is left out. The page and
its summaries are one snapshot. docs/sql.md, Browse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Select, bindparam, func, select, tuple_

from sessionstore.backends.cursors import Cursor
from sessionstore.backends.sql import activity as A
from sessionstore.backends.sql import survey
from sessionstore.backends.sql.lineage import END
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import activity, listing
from sessionstore.errors import InvalidCursorError
from sessionstore.store import Order, SessionSummary

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

Start = tuple[int, tuple[str, ...]]  # the listing's mark, and the key of the row before


def start(after: str, kind: str, order: Order) -> Start:
    """The mark and key a cursor of the listing ``kind`` carries."""
    cursor = Cursor.decode(after, kind, length=1 if order == "last_activity" else 2)
    if not cursor.mark.isdigit():
        raise InvalidCursorError(f"not a cursor: {after!r}")
    if order == "last_activity":
        tick = cursor.key[0]
        if not tick.isdigit() or int(tick) > int(cursor.mark):
            raise InvalidCursorError(f"not a cursor: {after!r}")
    return int(cursor.mark), cursor.key


def _owned(query: Select[Any], owned: bool) -> Select[Any]:
    return query.where(listing.c.owner == bindparam("owner")) if owned else query


def _newest(owned: bool) -> Query:
    """Sessions not written to since the mark, by their tick, below ``before``."""
    query = (
        select(listing.c.session_pk, listing.c.tick)
        .where(listing.c.tick < bindparam("before"))
        .order_by(listing.c.tick.desc())
        .limit(bindparam("size"))
    )
    return Query(_owned(query, owned))


def _movers(owned: bool) -> Query:
    """Sessions written to since the mark, with their last tick up to it, below ``before``."""
    at_mark = (
        select(func.max(activity.c.tick))
        .where(activity.c.session_pk == listing.c.session_pk, activity.c.tick <= bindparam("mark"))
        .scalar_subquery()
    )
    moved = select(listing.c.session_pk, at_mark.label("key")).where(
        listing.c.tick > bindparam("mark"), listing.c.created_tick <= bindparam("mark")
    )
    found = _owned(moved, owned).subquery()
    return Query(select(found.c.session_pk, found.c.key).where(found.c.key < bindparam("before")))


def _created(owned: bool, after: bool) -> Query:
    """Sessions by ``(created_at, session_id)``, below the cursor's key (``after``)."""
    query = select(listing.c.session_pk, listing.c.created_at, listing.c.session_id).where(
        listing.c.created_tick <= bindparam("mark")
    )
    if after:
        key = tuple_(listing.c.created_at, listing.c.session_id)
        query = query.where(key < tuple_(bindparam("created_at"), bindparam("session_id")))
    query = query.order_by(listing.c.created_at.desc(), listing.c.session_id.desc())
    return Query(_owned(query.limit(bindparam("size")), owned))


NEWEST = {owned: _newest(owned) for owned in (False, True)}

MOVERS = {owned: _movers(owned) for owned in (False, True)}

CREATED = {
    (owned, after): _created(owned, after) for owned in (False, True) for after in (False, True)
}


def page(
    conn: Connection,
    *,
    owner: str | None,
    order: Order,
    limit: int | None,
    begun: Start | None,
    where: str,
    sealer: Sealer | None = None,
) -> tuple[int, list[tuple[SessionSummary, tuple[str, ...]]]]:
    """A page of summaries, each with its key, and the mark it stands on.
    ``begun``: the mark and the page before's last key; None for a first
    page (on PostgreSQL, take `activity.mark` first, with an empty key)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    mark, key = begun if begun is not None else (A.mark(conn), ())
    size = END if limit is None else limit
    owned = owner is not None
    given: dict[str, Any] = {"mark": mark, "size": size, "owner": owner}
    rows: list[tuple[int, tuple[str, ...]]]
    if order == "created":
        if key:
            given.update(created_at=key[0], session_id=key[1])
        found = CREATED[owned, bool(key)].all(conn, **given)
        rows = [(pk, (created_at, session_id)) for pk, created_at, session_id in found]
    else:
        given["before"] = int(key[0]) if key else mark + 1
        ticks = NEWEST[owned].all(conn, **given) + MOVERS[owned].all(conn, **given)
        ticks = sorted(ticks, key=lambda row: row[1], reverse=True)[:size]
        rows = [(pk, (str(tick),)) for pk, tick in ticks]
    found_summaries = survey.summaries(conn, [pk for pk, _ in rows], where=where, sealer=sealer)
    return mark, [(found_summaries[pk], key) for pk, key in rows if pk in found_summaries]
