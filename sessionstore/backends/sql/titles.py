"""Titles chosen after a session's creation: one ``titles`` row per change.

Transaction bodies (plain functions of a `Connection`) for `SqlStore`. A
change takes the next ``seq`` of its session with the session's row locked
(on PostgreSQL ``FOR NO KEY UPDATE``, as an append; SQLite has one writer),
so no two changes take one ``seq``, and an erase of the session either
waits for the change (and erases it) or makes it find no session.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, func, insert, select

from sessionstore.backends.sql.database import find_session
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import titles
from sessionstore.models import TitleChange

__all__ = ["changes", "extend", "record"]

_of = titles.c.session_pk == bindparam("pk")
_COUNT = Query(select(func.coalesce(func.max(titles.c.seq), 0)).where(_of))
_HISTORY = Query(select(titles.c.title, titles.c.at).where(_of).order_by(titles.c.seq))
_INSERT = Query(insert(titles))


def record(conn: Connection, *, change: TitleChange) -> None:
    """Record ``change`` as its session's newest title.

    Raises:
        SessionNotFoundError: no such session.
    """
    extend(conn, session_id=change.session_id, changes=[change], after=None)


def extend(
    conn: Connection, *, session_id: str, changes: list[TitleChange], after: int | None
) -> int:
    """Append ``changes`` to the session's titles when it holds ``after`` of
    them (None: however many); how many were recorded.

    Raises:
        SessionNotFoundError: no such session.
    """
    pk = find_session(conn, session_id, lock=True).pk
    held = int(_COUNT.scalar(conn, pk=pk))
    if after is not None and held != after:
        return 0
    rows = [
        {"session_pk": pk, "seq": seq, "title": change.title, "at": change.at}
        for seq, change in enumerate(changes, held + 1)
    ]
    if rows:
        _INSERT.many(conn, rows)
    return len(rows)


def changes(conn: Connection, *, session_id: str) -> list[TitleChange]:
    """Every title change of the session, oldest first.

    Raises:
        SessionNotFoundError: no such session.
    """
    pk = find_session(conn, session_id).pk
    return [
        TitleChange(session_id=session_id, title=title, at=at)
        for title, at in _HISTORY.all(conn, pk=pk)
    ]
