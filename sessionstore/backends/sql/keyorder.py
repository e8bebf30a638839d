"""A sealed store's journal keys in order, kept by its store object for `scan`.

In a sealed store ``journal_keys`` holds tokens, which keep no order, so
the keys of a prefix cannot be read from it. `KeyOrders` keeps, per
journal, its keys since the last clear in order, built once by opening the
journal's lines and caught up with the rows written since (by ``seq``, which
each journal's writers give in commit order, under its lock); a clear
among them empties it. Any erasure (an erase or a drop, from any process)
changes the store's newest erasure ``seq``, and the keys are then built
again. A scan takes the keys of its page from here and their lines from
the index, by token: after the first, it costs what it returns.

The keys are held in this process's memory, in the clear, as the lines
they come from are when read; `SqlStore.drop_caches` forgets them.
"""

from __future__ import annotations

import bisect
import builtins
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, func, select

from sessionstore.backends.keyed import Scanned, bound
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.journalkeys import lines_under
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import journal_lines
from sessionstore.wire import line_key

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

__all__ = ["KeyOrders"]

_l = journal_lines.c
_LAST_CLEAR = Query(
    select(func.coalesce(func.max(_l.seq), 0)).where(
        _l.journal == bindparam("name"), _l.line.is_(None)
    )
)
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
    """The ordered keys of a sealed store's journals (see the module)."""

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
        """`JournalBase.scan` of the journal ``name`` (a read transaction's body)."""
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
            order = self._by_name[name] = _Order(mark, _LAST_CLEAR.scalar(conn, name=name))
        for seq, line in _AFTER.all(conn, name=name, after=order.after):
            order.after = seq
            if line is None:
                order.clear()
                continue
            key = line_key(sealer.open("journal", name, seq, line, where="journal_lines"))
            if key is not None:
                order.add(key)
        return order
