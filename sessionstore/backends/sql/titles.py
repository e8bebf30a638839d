"""Titles chosen after a session's creation: one ``titles`` row per change.

Transaction bodies (plain functions of a `Connection`) for `SqlStore`. A
change takes the next ``seq`` of its session with the session's row locked
(on PostgreSQL ``FOR NO KEY UPDATE``, as an append; SQLite has one writer),
so no two changes take one ``seq``, and an erase of the session either
waits for the change (and erases it) or makes it find no session. In a
sealed store a title is kept sealed under its session's data key (None,
back to the header's title, stays None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, func, insert, select

from sessionstore.backends.sql.database import find_session
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import titles
from sessionstore.models import TitleChange

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

__all__ = ["changes", "extend", "opened", "record"]

_of = titles.c.session_pk == bindparam("pk")
_COUNT = Query(select(func.coalesce(func.max(titles.c.seq), 0)).where(_of))
_HISTORY = Query(
    select(titles.c.seq, titles.c.title, titles.c.at).where(_of).order_by(titles.c.seq)
)
_INSERT = Query(insert(titles))


def record(conn: Connection, *, change: TitleChange, sealer: Sealer | None = None) -> None:
    """Record ``change`` as its session's newest title.

    Raises:
        SessionNotFoundError: no such session.
    """
    extend(conn, session_id=change.session_id, changes=[change], after=None, sealer=sealer)


def extend(
    conn: Connection,
    *,
    session_id: str,
    changes: list[TitleChange],
    after: int | None,
    sealer: Sealer | None = None,
) -> int:
    """Append ``changes`` to the session's titles when it holds ``after`` of
    them (None: however many); how many were recorded.

    Raises:
        SessionNotFoundError: no such session.
    """
    row = find_session(conn, session_id, lock=True)
    held = int(_COUNT.scalar(conn, pk=row.pk))
    if after is not None and held != after:
        return 0
    key = None if sealer is None else sealer.key_of(row.header, "header", session_id)
    rows = [
        {
            "session_pk": row.pk,
            "seq": seq,
            "title": change.title
            if sealer is None or key is None or change.title is None
            else sealer.seal_text(key, "title", session_id, seq, change.title),
            "at": change.at,
        }
        for seq, change in enumerate(changes, held + 1)
    ]
    if rows:
        _INSERT.many(conn, rows)
    return len(rows)


def changes(
    conn: Connection, *, session_id: str, sealer: Sealer | None = None
) -> list[TitleChange]:
    """Every title change of the session, oldest first.

    Raises:
        SessionNotFoundError: no such session.
        CorruptSessionError: a sealed title does not open.
    """
    pk = find_session(conn, session_id).pk
    return [
        TitleChange(session_id=session_id, title=opened(sealer, session_id, seq, title), at=at)
        for seq, title, at in _HISTORY.all(conn, pk=pk)
    ]


def opened(sealer: Sealer | None, session_id: str, seq: int, title: str | None) -> str | None:
    """A title as set: ``titles.title`` of change ``seq``, opened when sealed."""
    if sealer is None or title is None:
        return title
    return sealer.open_text("title", session_id, seq, title, where="titles")
