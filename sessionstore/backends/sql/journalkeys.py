"""Keyed journal lines: the ``journal_keys`` index (migration 0011), and a
sealed store's keys in order (`KeyOrders`); docs/sql.md, Keyed journal lines.

A sealed store's index holds each key's token (`Sealer.journal_line_key`),
which keeps no order: its `scan` takes the keys in order from `KeyOrders`.
"""

from __future__ import annotations

import bisect
import builtins
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, bindparam, delete, insert, select

from sessionstore.backends.keyed import Keyed, Scanned, bound
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.tables import journal_keys, journal_lines, journal_unindexed
from sessionstore.wire import line_key

if TYPE_CHECKING:
    from sessionstore.backends.sql.database import Database
    from sessionstore.encryption.sealer import Sealer

_k, _l = journal_keys.c, journal_lines.c
_joined = journal_keys.join(journal_lines, and_(_l.journal == _k.journal, _l.seq == _k.seq))
_last_clear = Q.last_clear

_UNDER = Query(
    select(_l.seq, _l.line)
    .select_from(_joined)
    .where(_k.journal == bindparam("name"), _k.key == bindparam("key"), _k.seq > _last_clear)
    .order_by(_k.seq)
)

_HISTORY = Query(
    select(_l.seq, _l.line)
    .select_from(_joined)
    .where(_k.journal == bindparam("name"), _k.key == bindparam("key"))
    .order_by(_k.seq)
)


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
    return key if sealer is None else sealer.journal_line_key(name, key)


def _opened(sealer: Sealer | None, name: str, seq: int, line: bytes) -> bytes:
    if sealer is None:
        return bytes(line)
    return sealer.open("journal", name, seq, line, where="journal_lines")


def index_rows(
    conn: Connection, name: str, rows: Iterable[tuple[int, bytes]], sealer: Sealer | None
) -> None:
    """Index the keyed lines among ``rows`` (``(seq, line)``, not sealed) just written."""
    found = [
        {"journal": name, "key": stored_key(sealer, name, key), "seq": seq}
        for seq, line in rows
        if (key := line_key(line)) is not None
    ]
    if found:
        _INSERT.many(conn, found)


def lines_under(conn: Connection, name: str, keys: Sequence[str], sealer: Sealer | None) -> Keyed:
    found: Keyed = {}
    for key in keys:
        rows = _UNDER.all(conn, name=name, key=stored_key(sealer, name, key))
        if rows:
            found[key] = [_opened(sealer, name, seq, line) for seq, line in rows]
    return found


def history_under(
    conn: Connection, name: str, keys: Sequence[str], sealer: Sealer | None
) -> Iterator[tuple[str, int, bytes]]:
    """Every ``(key, seq, line)`` the journal ever held under ``keys``, before clears too."""
    for key in keys:
        for seq, line in _HISTORY.all(conn, name=name, key=stored_key(sealer, name, key)):
            yield key, seq, _opened(sealer, name, seq, line)


def forget_lines(
    conn: Connection, name: str, keys: Sequence[str], seqs: Sequence[int], sealer: Sealer | None
) -> None:
    """Delete the index's rows of ``keys`` and the lines ``seqs`` (an erasure's body)."""
    _DELETE_KEY.many(conn, [{"name": name, "key": stored_key(sealer, name, k)} for k in keys])
    _DELETE_LINE.many(conn, [{"name": name, "seq": seq} for seq in seqs])


def scan(
    conn: Connection, name: str, low: str, high: str | None, limit: int
) -> builtins.list[tuple[str, builtins.list[bytes]]]:
    """A plain store's scan: the keys in ``[low, high)``, at most ``limit``, greatest first."""
    if high is None:
        rows = _RANGE.all(conn, name=name, low=low, limit=limit)
    else:
        rows = _RANGE_BOUNDED.all(conn, name=name, low=low, high=high, limit=limit)
    found: dict[str, builtins.list[bytes]] = {}
    for key, line in rows:
        found.setdefault(key, []).append(bytes(line))
    return builtins.list(found.items())


def delete_journal(conn: Connection, name: str) -> None:
    _DELETE_JOURNAL.many(conn, [{"name": name}])


async def index_unindexed(database: Database) -> None:
    """Index the journals a migration could not (it had no keys), one transaction each."""
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


_AFTER = Query(
    select(_l.seq, _l.line)
    .where(_l.journal == bindparam("name"), _l.seq > bindparam("after"))
    .order_by(_l.seq)
)


@dataclass
class _Order:
    """One journal's keys since its last clear, in order, as read up to ``after``."""

    mark: int  # the store's newest erasure when built
    after: int  # the last seq read
    keys: builtins.list[str] = field(default_factory=builtins.list)
    known: set[str] = field(default_factory=set)

    def add(self, key: str) -> None:
        if key not in self.known:
            self.known.add(key)
            bisect.insort(self.keys, key)

    def clear(self) -> None:
        self.keys.clear()
        self.known.clear()


class KeyOrders:
    """A sealed store's journals' keys since their last clear, in order: built
    once from the lines, caught up by ``seq`` (each journal's writers commit
    in ``seq`` order, under its lock), built again after any erasure. Held
    in this process's memory, in the clear, as the lines read are."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, _Order] = {}

    def drop(self) -> None:
        """Forget every journal's keys: the next scan builds its journal's anew."""
        with self._lock:
            self._by_name.clear()

    def scan(
        self,
        conn: Connection,
        *,
        name: str,
        sealer: Sealer,
        prefix: str,
        before: str | None,
        limit: int | None,
    ) -> Scanned:
        with self._lock:
            keys = self._caught_up(conn, name, sealer).keys
            end = bound(prefix, before)
            low = bisect.bisect_left(keys, prefix)
            high = len(keys) if end is None else bisect.bisect_left(keys, end)
            page = keys[low:high]
        found: Scanned = []
        for key in reversed(page):
            if limit is not None and len(found) >= limit:
                break
            lines = lines_under(conn, name, [key], sealer).get(key)
            if lines:  # none: dropped since the keys were read
                found.append((key, lines))
        return found

    def _caught_up(self, conn: Connection, name: str, sealer: Sealer) -> _Order:
        mark = Q.ERASURE_MARK.scalar(conn)
        order = self._by_name.get(name)
        if order is None or order.mark != mark:
            order = self._by_name[name] = _Order(mark, Q.LAST_CLEAR.scalar(conn, name=name))
        for seq, line in _AFTER.all(conn, name=name, after=order.after):
            order.after = seq
            if line is None:
                order.clear()
                continue
            key = line_key(sealer.open("journal", name, seq, line, where="journal_lines"))
            if key is not None:
                order.add(key)
        return order
