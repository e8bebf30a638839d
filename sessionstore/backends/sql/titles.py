"""Titles chosen after a session's creation: one ``titles`` row per change,
taking the next ``seq`` with the session's row locked (as an append), so an
erase waits for it or it finds no session. Sealed under the session's key.
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

_of = titles.c.session_pk == bindparam("pk")
_COUNT = Query(select(func.coalesce(func.max(titles.c.seq), 0)).where(_of))
_HISTORY = Query(
    select(titles.c.seq, titles.c.title, titles.c.at).where(_of).order_by(titles.c.seq)
)
_INSERT = Query(insert(titles))


def record(conn: Connection, *, change: TitleChange, sealer: Sealer | None = None) -> None:
    extend(conn, session_id=change.session_id, changes=[change], after=None, sealer=sealer)


def extend(
    conn: Connection,
    *,
    session_id: str,
    changes: list[TitleChange],
    after: int | None,
    sealer: Sealer | None = None,
) -> int:
    """Append ``changes`` when the session holds ``after`` titles (None: any); how many."""
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
    pk = find_session(conn, session_id).pk
    return [
        TitleChange(session_id=session_id, title=opened(sealer, session_id, seq, title), at=at)
        for seq, title, at in _HISTORY.all(conn, pk=pk)
    ]


def opened(sealer: Sealer | None, session_id: str, seq: int, title: str | None) -> str | None:
    if sealer is None or title is None:
        return title
    return sealer.open_text("title", session_id, seq, title, where="titles")
