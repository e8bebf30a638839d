"""Named heads on SQL: every position a head had, one row each, in ``heads``.

A move takes the next ``seq`` in its write transaction, behind SQLite's
writer lock or a PostgreSQL advisory lock on the name. In a sealed store
``head_seals`` authenticates each position (`Sealer.head_seal`), and a
read refuses one whose seal is missing or wrong (docs/encryption.md).
"""

from __future__ import annotations

import hmac
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, bindparam, insert, select

from sessionstore.backends.checks import check_head, check_last
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import chain_end, find_session, last_entry_id
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import head_seals, heads
from sessionstore.errors import CorruptSessionError, SessionConflictError
from sessionstore.models import HeadMove

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

_SEALED = select(heads.c.seq, heads.c.session_id, heads.c.at, head_seals.c.seal).select_from(
    heads.outerjoin(
        head_seals, and_(head_seals.c.name == heads.c.name, head_seals.c.seq == heads.c.seq)
    )
)
_SEALED_HISTORY = Query(_SEALED.where(heads.c.name == bindparam("name")).order_by(heads.c.seq))
_SEALED_LAST = Query(
    _SEALED.where(heads.c.name == bindparam("name")).order_by(heads.c.seq.desc()).limit(1)
)
_UNSEALED = Query(
    _SEALED.add_columns(heads.c.name)
    .where(head_seals.c.seal.is_(None))
    .order_by(heads.c.name, heads.c.seq)
)
_INSERT_SEAL = Query(insert(head_seals))


def _seal_rows(conn: Connection, sealer: Sealer | None, rows: list[dict[str, Any]]) -> None:
    if sealer is not None and rows:
        seals = [
            {"name": row["name"], "seq": row["seq"], "seal": sealer.head_seal(**row)}
            for row in rows
        ]
        _INSERT_SEAL.many(conn, seals)


def _checked(sealer: Sealer, name: str, row: Any) -> tuple[int, str, str]:
    """A sealed store's position ``(seq, session_id, at, seal)``, its seal checked."""
    seq, session_id, at, seal = int(row[0]), str(row[1]), str(row[2]), row[3]
    if seal is None:
        reason = (
            "has no seal: written without the keys, or before the store sealed its heads "
            "(SqlStore.seal_heads, once, after the upgrade to 0010)"
        )
    elif not hmac.compare_digest(
        str(seal), sealer.head_seal(name=name, seq=seq, session_id=session_id, at=at)
    ):
        reason = "does not match its seal: moved, or copied from another head, without the keys"
    else:
        return seq, session_id, at
    raise CorruptSessionError(
        session_id, f"head {name!r} position {seq} names it but {reason}; not served", path="heads"
    )


def move(
    conn: Connection,
    *,
    name: str,
    to: HeadMove,
    expect: str | EllipsisType | None = ...,
    expect_last: str | None = None,
    sealer: Sealer | None = None,
) -> None:
    """Record ``to`` as the newest position of ``name`` if the head stands at
    ``expect`` and, with ``expect_last``, that session ends there (its row
    locked first, as an append locks it before its head)."""
    find_session(conn, to.session_id)
    if expect_last is not None:
        assert isinstance(expect, str)
        left = find_session(conn, expect, lock=True)
        seq, _ = chain_end(conn, expect, left)
        check_last(expect, expect_last, last_entry_id(conn, expect, left, seq), by="move")
    if conn.dialect.name == "postgresql":
        Q.LOCK_HEAD.first(conn, name=name)
    last = _last(conn, name, sealer)
    check_head(name, expect, None if last is None else last[1])
    row = {"name": name, "seq": 1 if last is None else last[0] + 1, **to.model_dump()}
    Q.INSERT_HEAD.many(conn, [row])
    _seal_rows(conn, sealer, [row])


def extend(
    conn: Connection,
    *,
    name: str,
    moves: list[HeadMove],
    after: int,
    sealer: Sealer | None = None,
) -> None:
    """Record ``moves`` after the first ``after`` positions of ``name`` (a move
    may name a session no longer held: it is history)."""
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
        _seal_rows(conn, sealer, rows)


def history(conn: Connection, *, name: str, sealer: Sealer | None = None) -> list[HeadMove]:
    if sealer is None:
        return [
            HeadMove(session_id=session_id, at=at)
            for session_id, at in Q.HEAD_HISTORY.all(conn, name=name)
        ]
    checked = (_checked(sealer, name, row) for row in _SEALED_HISTORY.all(conn, name=name))
    return [HeadMove(session_id=session_id, at=at) for _, session_id, at in checked]


def _last(conn: Connection, name: str, sealer: Sealer | None) -> tuple[int, str] | None:
    if sealer is None:
        last = Q.HEAD_LAST.first(conn, name=name)
        return None if last is None else (int(last[0]), str(last[1]))
    row = _SEALED_LAST.first(conn, name=name)
    return None if row is None else _checked(sealer, name, row)[:2]


def head(conn: Connection, *, name: str, sealer: Sealer | None = None) -> str | None:
    last = _last(conn, name, sealer)
    return None if last is None else last[1]


def names(conn: Connection) -> list[str]:
    return [name for (name,) in Q.HEAD_NAMES.all(conn)]


def faults(conn: Connection, *, sealer: Sealer) -> list[str]:
    """A sealed store's first bad position of each head (for `integrity`)."""
    found = []
    for name in names(conn):
        try:
            history(conn, name=name, sealer=sealer)
        except CorruptSessionError as exc:
            found.append(str(exc))
    return found


def seal_all(conn: Connection, *, sealer: Sealer) -> int:
    """Seal every position without a seal, trusting it; how many."""
    rows = [
        {"name": row[4], "seq": int(row[0]), "session_id": str(row[1]), "at": str(row[2])}
        for row in _UNSEALED.all(conn)
    ]
    _seal_rows(conn, sealer, rows)
    return len(rows)
