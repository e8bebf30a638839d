"""The index of keyed journal lines: ``journal_keys`` (migration 0011).

A row per keyed line (`sessionstore.wire.line_key`): its journal, its key
and its ``seq``, written in the transaction that writes the line. A
journal's lines under a key since its last clear are one indexed join
(`lines_under`), a prefix of keys one more (`scan`): their cost is what
they return, whatever the journal's length. Keys from before the last
clear stay in the index (the lines stay in the table), skipped by
``seq``.

In a sealed store the index holds each key's token (`Sealer.journal_line_key`,
a keyed hash bound to the journal), never the key: a reader of the
database learns which lines share a key, and nothing of the key. Tokens
keep no order, so a sealed store's `scan` takes its keys in order from
its store object (`sessionstore.backends.sql.keyorder`). The journals a
migration could not index (it has no keys: ``journal_unindexed``) are
indexed by the first open with the keys (`index_unindexed`).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, bindparam, delete, func, insert, select

from sessionstore.backends.keyed import Keyed
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.tables import journal_keys, journal_lines, journal_unindexed
from sessionstore.wire import line_key

if TYPE_CHECKING:
    from sessionstore.backends.sql.database import Database
    from sessionstore.encryption.sealer import Sealer

__all__ = [
    "delete_journal",
    "history_under",
    "index_rows",
    "index_unindexed",
    "lines_under",
    "scan",
    "stored_key",
]

_k, _l = journal_keys.c, journal_lines.c
_joined = journal_keys.join(journal_lines, and_(_l.journal == _k.journal, _l.seq == _k.seq))
_last_clear = (
    select(func.coalesce(func.max(_l.seq), 0))
    .where(_l.journal == bindparam("name"), _l.line.is_(None))
    .scalar_subquery()
)

_UNDER = Query(
    select(_l.seq, _l.line)
    .select_from(_joined)
    .where(_k.journal == bindparam("name"), _k.key == bindparam("key"), _k.seq > _last_clear)
    .order_by(_k.seq)
)
"""A journal's ``(seq, line)`` under a key (``name``, ``key``) since its last clear."""

_HISTORY = Query(
    select(_l.seq, _l.line)
    .select_from(_joined)
    .where(_k.journal == bindparam("name"), _k.key == bindparam("key"))
    .order_by(_k.seq)
)
"""Every ``(seq, line)`` a journal ever held under a key (``name``, ``key``)."""


def _range(bounded: bool) -> Query:
    """The lines of a page of keys (``name``, ``low``, ``high`` when
    ``bounded``, ``limit``): ``(key, line)``, the greatest key first."""
    keys = select(_k.key).where(
        _k.journal == bindparam("name"), _k.key >= bindparam("low"), _k.seq > _last_clear
    )
    if bounded:
        keys = keys.where(_k.key < bindparam("high"))
    page = keys.distinct().order_by(_k.key.desc()).limit(bindparam("limit")).subquery()
    return Query(
        select(_k.key, _l.line)
        .select_from(_joined)
        .where(_k.journal == bindparam("name"), _k.key.in_(select(page.c.key)))
        .where(_k.seq > _last_clear)
        .order_by(_k.key.desc(), _k.seq)
    )


_RANGE, _RANGE_BOUNDED = _range(False), _range(True)

_INSERT = Query(insert(journal_keys))
_DELETE_KEY = Query(
    delete(journal_keys).where(_k.journal == bindparam("name"), _k.key == bindparam("key"))
)
_DELETE_LINE = Query(
    delete(journal_lines).where(_l.journal == bindparam("name"), _l.seq == bindparam("seq"))
)
_DELETE_JOURNAL = Query(delete(journal_keys).where(_k.journal == bindparam("name")))
_UNINDEXED = Query(select(journal_unindexed.c.journal).order_by(journal_unindexed.c.journal))
_UNINDEXED_ONE = Query(
    select(journal_unindexed.c.journal).where(journal_unindexed.c.journal == bindparam("name"))
)
_INDEXED = Query(delete(journal_unindexed).where(journal_unindexed.c.journal == bindparam("name")))


def stored_key(sealer: Sealer | None, name: str, key: str) -> str:
    """What the index holds for ``key`` of the journal ``name``."""
    return key if sealer is None else sealer.journal_line_key(name, key)


def _opened(sealer: Sealer | None, name: str, seq: int, line: bytes) -> bytes:
    if sealer is None:
        return bytes(line)
    return sealer.open("journal", name, seq, line, where="journal_lines")


def index_rows(
    conn: Connection, name: str, rows: Iterable[tuple[int, bytes]], sealer: Sealer | None
) -> None:
    """Index the keyed lines among ``rows`` (``(seq, line)``, as given:
    not sealed) of the journal ``name``, just written."""
    found = [
        {"journal": name, "key": stored_key(sealer, name, key), "seq": seq}
        for seq, line in rows
        if (key := line_key(line)) is not None
    ]
    if found:
        _INSERT.many(conn, found)


def lines_under(conn: Connection, name: str, keys: Sequence[str], sealer: Sealer | None) -> Keyed:
    """`JournalBase.keyed` of the journal ``name``: an index lookup per key."""
    found: Keyed = {}
    for key in keys:
        rows = _UNDER.all(conn, name=name, key=stored_key(sealer, name, key))
        if rows:
            found[key] = [_opened(sealer, name, seq, line) for seq, line in rows]
    return found


def history_under(
    conn: Connection, name: str, keys: Sequence[str], sealer: Sealer | None
) -> Iterator[tuple[str, int, bytes]]:
    """Every ``(key, seq, line)`` the journal ``name`` ever held under ``keys``
    (its lines before a clear too), opened."""
    for key in keys:
        for seq, line in _HISTORY.all(conn, name=name, key=stored_key(sealer, name, key)):
            yield key, seq, _opened(sealer, name, seq, line)


def forget_lines(
    conn: Connection, name: str, keys: Sequence[str], seqs: Sequence[int], sealer: Sealer | None
) -> None:
    """Delete the index's rows of ``keys`` and the lines ``seqs`` of the
    journal ``name`` (in the transaction of the erasure recording them)."""
    _DELETE_KEY.many(conn, [{"name": name, "key": stored_key(sealer, name, k)} for k in keys])
    _DELETE_LINE.many(conn, [{"name": name, "seq": seq} for seq in seqs])


def scan(
    conn: Connection, name: str, low: str, high: str | None, limit: int
) -> builtins.list[tuple[str, builtins.list[bytes]]]:
    """`JournalBase.scan` of a plain store's journal ``name``: the keys in
    ``[low, high)``, at most ``limit``, the greatest first."""
    if high is None:
        rows = _RANGE.all(conn, name=name, low=low, limit=limit)
    else:
        rows = _RANGE_BOUNDED.all(conn, name=name, low=low, high=high, limit=limit)
    found: dict[str, builtins.list[bytes]] = {}
    for key, line in rows:
        found.setdefault(key, []).append(bytes(line))
    return builtins.list(found.items())


def delete_journal(conn: Connection, name: str) -> None:
    """Delete the index's rows of the journal ``name`` (erased whole)."""
    _DELETE_JOURNAL.many(conn, [{"name": name}])


async def index_unindexed(database: Database) -> None:
    """Index the journals the migration could not (a sealed store's), each
    in a write transaction of its own, with the store's keys."""
    sealer = database.sealer
    names = [name for (name,) in await database.transaction(Kind.READ, None, _UNINDEXED.all)]
    for name in names:

        def body(conn: Connection, name: str = name) -> None:
            if conn.dialect.name == "postgresql":
                Q.LOCK_JOURNAL.first(conn, name=name)
            if _UNINDEXED_ONE.first(conn, name=name) is None:
                return  # another process indexed it meanwhile
            rows = (
                (seq, _opened(sealer, name, seq, line))
                for seq, line in Q.JOURNAL_HISTORY.all(conn, name=name)
            )
            index_rows(conn, name, rows, sealer)
            _INDEXED.many(conn, [{"name": name}])

        await database.transaction(Kind.DURABLE_WRITE, name, body)
