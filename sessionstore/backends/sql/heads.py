"""Named heads on SQL: every position a head had, one row each, in ``heads``.

Transaction bodies (plain functions of a `Connection`) for `SqlStore`. A
move takes the next ``seq`` of its head inside the write transaction: on
SQLite the writer lock lets one mover in at a time, on PostgreSQL an
advisory lock on the head's name queues its movers, so no move is lost or
reordered against its commit.
"""

from __future__ import annotations

from types import EllipsisType

from sqlalchemy import Connection

from sessionstore.backends.checks import check_head, check_last
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import chain_end, find_session, last_entry_id
from sessionstore.errors import SessionConflictError
from sessionstore.models import HeadMove

__all__ = ["extend", "head", "history", "move", "names"]


def move(
    conn: Connection,
    *,
    name: str,
    to: HeadMove,
    expect: str | EllipsisType | None = ...,
    expect_last: str | None = None,
) -> None:
    """Record ``to`` as the newest position of ``name``, if its session exists,
    the head stands at ``expect`` (`check_head`) and, with ``expect_last``,
    the session ``expect`` names ends there (`check_last`: its row locked
    first, as an append locks it before its head).

    Raises:
        SessionNotFoundError: no session ``to.session_id`` (or ``expect``).
        SessionConflictError: the head stands elsewhere, or its session ends
            elsewhere.
    """
    find_session(conn, to.session_id)
    if expect_last is not None:
        assert isinstance(expect, str)
        left = find_session(conn, expect, lock=True)
        seq, _ = chain_end(conn, expect, left)
        check_last(expect, expect_last, last_entry_id(conn, expect, left, seq), by="move")
    if conn.dialect.name == "postgresql":
        Q.LOCK_HEAD.first(conn, name=name)
    last = Q.HEAD_LAST.first(conn, name=name)
    check_head(name, expect, None if last is None else str(last[1]))
    row = {"name": name, "seq": 1 if last is None else last[0] + 1, **to.model_dump()}
    Q.INSERT_HEAD.many(conn, [row])


def extend(conn: Connection, *, name: str, moves: list[HeadMove], after: int) -> None:
    """Record ``moves`` as they are after the first ``after`` positions of ``name``.

    A move may name a session the store no longer holds (erased, retired):
    it is history, as the head had it.

    Raises:
        SessionConflictError: ``name`` holds another number of positions.
    """
    if conn.dialect.name == "postgresql":
        Q.LOCK_HEAD.first(conn, name=name)
    last = Q.HEAD_LAST.first(conn, name=name)
    held = 0 if last is None else int(last[0])
    if held != after:
        raise SessionConflictError(name, f"holds {held} positions, not {after}", "head")
    rows = [
        {"name": name, "seq": after + n, **move.model_dump()} for n, move in enumerate(moves, 1)
    ]
    if rows:
        Q.INSERT_HEAD.many(conn, rows)


def history(conn: Connection, *, name: str) -> list[HeadMove]:
    """Every position of ``name``, oldest first."""
    return [
        HeadMove(session_id=session_id, at=at)
        for session_id, at in Q.HEAD_HISTORY.all(conn, name=name)
    ]


def head(conn: Connection, *, name: str) -> str | None:
    """The session ``name`` names now; None if it was never set."""
    last = Q.HEAD_LAST.first(conn, name=name)
    return None if last is None else str(last[1])


def names(conn: Connection) -> list[str]:
    """The name of every head ever set."""
    return [name for (name,) in Q.HEAD_NAMES.all(conn)]
