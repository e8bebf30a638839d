"""`SqlJournal`: a journal in the ``journal_lines`` table, one row per line;
a clear is a row whose ``line`` is NULL. Its durability, sealing and keyed
lines: docs/journal.md and docs/sql.md, Keyed journal lines.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator, Sequence
from functools import partial
from typing import TypeVar

from sqlalchemy import Connection

from sessionstore.backends.base import JournalBase
from sessionstore.backends.checks import COUNT_MAX
from sessionstore.backends.keyed import Keyed, Scanned, bound, check_keys
from sessionstore.backends.records import journal_bytes, raw_journal_lines
from sessionstore.backends.sql import journalkeys
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import Database
from sessionstore.backends.sql.erase import drop_journal_keys, erase_journal_of
from sessionstore.backends.sql.journalkeys import KeyOrders
from sessionstore.backends.sql.runner import Kind
from sessionstore.effects import EFFECTS_SUFFIX
from sessionstore.models import Erasure

_T = TypeVar("_T")


class SqlJournal(JournalBase):
    def __init__(
        self,
        database: Database,
        name: str,
        orders: KeyOrders | None = None,
        *,
        synced: bool = True,
    ) -> None:
        self._database = database
        self._name = name
        self._orders = KeyOrders() if orders is None else orders
        self._synced = synced

    def __repr__(self) -> str:
        return f"SqlJournal({self._database.where!r}, {self._name!r})"

    def _lines(self, conn: Connection) -> Generator[bytes, None, None]:
        """The lines after the last clear, opened (close it if left unfinished)."""
        sealer = self._database.sealer
        with contextlib.closing(Q.JOURNAL_LINES.each(conn, name=self._name)) as rows:
            for seq, line in rows:
                if sealer is None:
                    yield line
                else:
                    yield sealer.open("journal", self._name, seq, line, where="journal_lines")

    async def read_bytes(self) -> bytes:
        self._database.check_open(self._name)
        lines = partial(_listed, self._lines)
        return journal_bytes(await self._database.transaction(Kind.READ, self._name, lines))

    async def _add(
        self,
        lines: list[bytes | None],
        look: Callable[[Connection], _T | None] | None = None,
    ) -> _T | None:
        """Append rows (None: a clear, written only when it changes something)
        and index their keys, unless ``look`` finds a reason not to."""
        self._database.check_open(self._name)
        sealer, name = self._database.sealer, self._name

        def body(conn: Connection) -> _T | None:
            if conn.dialect.name == "postgresql":
                # Writers of one journal queue here; SQLite's BEGIN IMMEDIATE
                # already lets one writer in at a time.
                Q.LOCK_JOURNAL.first(conn, name=self._name)
            if look is not None:
                seen = look(conn)
                if seen is not None:
                    return seen
            last = Q.JOURNAL_LAST_ROW.first(conn, name=self._name)
            if lines == [None] and (last is None or last[1] is None):
                return None  # nothing to clear
            seq = 0 if last is None else last[0]
            key = None if sealer is None else sealer.journal_key(name)
            rows = [
                {
                    "journal": name,
                    "seq": seq + n,
                    "line": line
                    if sealer is None or key is None or line is None
                    else sealer.seal(key, "journal", name, seq + n, line),
                }
                for n, line in enumerate(lines, 1)
            ]
            Q.INSERT_JOURNAL_LINES.many(conn, rows)
            written = ((seq + n, line) for n, line in enumerate(lines, 1) if line is not None)
            journalkeys.index_rows(conn, name, written, sealer)
            return None

        durable = self._synced or lines == [None]  # a clear syncs fully
        return await self._database.transaction(
            Kind.DURABLE_WRITE if durable else Kind.WRITE, self._name, body
        )

    def _held(self, found: Callable[[Iterator[bytes]], _T | None], conn: Connection) -> _T | None:
        with contextlib.closing(self._lines(conn)) as held:
            return found(held)

    async def append_raw(self, *lines: bytes) -> None:
        checked: list[bytes | None] = [*raw_journal_lines(lines)]
        if checked:
            await self._add(checked)

    async def append_unless(
        self, found: Callable[[Iterator[bytes]], _T | None], *lines: bytes
    ) -> _T | None:
        return await self._add([*raw_journal_lines(lines)], partial(self._held, found))

    async def append_keyed_unless(
        self, keys: Sequence[str], found: Callable[[Keyed], _T | None], *lines: bytes
    ) -> _T | None:
        wanted = check_keys(keys)
        return await self._add(
            [*raw_journal_lines(lines)], lambda conn: found(self._under(conn, wanted))
        )

    def _under(self, conn: Connection, keys: list[str]) -> Keyed:
        return journalkeys.lines_under(conn, self._name, keys, self._database.sealer)

    async def _keyed(self, keys: list[str]) -> Keyed:
        self._database.check_open(self._name)
        if not keys:
            return {}
        return await self._database.transaction(
            Kind.READ, self._name, partial(self._under, keys=keys)
        )

    async def _scan(self, prefix: str, before: str | None, limit: int | None) -> Scanned:
        self._database.check_open(self._name)
        sealer = self._database.sealer
        if sealer is not None:  # tokens keep no order: the keys in order are kept apart
            scan = partial(
                self._orders.scan,
                name=self._name,
                sealer=sealer,
                prefix=prefix,
                before=before,
                limit=limit,
            )
            return await self._database.transaction(Kind.READ, self._name, scan)
        high, most = bound(prefix, before), COUNT_MAX if limit is None else limit
        if high is not None and high <= prefix:
            return []
        scan = partial(journalkeys.scan, name=self._name, low=prefix, high=high, limit=most)
        return await self._database.transaction(Kind.READ, self._name, scan)

    async def _drop(self, keys: list[str], reason: str) -> Erasure | None:
        self._database.check_open(self._name)
        body = partial(
            drop_journal_keys,
            name=self._name,
            keys=keys,
            reason=reason,
            sealer=self._database.sealer,
        )
        return await self._database.erase(self._name, body)

    def _effects_place(self) -> tuple[str | None, tuple[str, ...] | None]:
        keys = () if self._database.sealer is None else ("--key-file", "KEYS")
        return self._name, ("--db", self._database.target, *keys)

    def _effects_journal(self) -> SqlJournal:
        return SqlJournal(self._database, self._name + EFFECTS_SUFFIX, self._orders)

    async def clear(self) -> None:
        await self._add([None])

    async def _erase(self, reason: str) -> Erasure | None:
        self._database.check_open(self._name)
        return await erase_journal_of(self._database, self._name, reason)


def _listed(lines: Callable[[Connection], Iterator[bytes]], conn: Connection) -> list[bytes]:
    return list(lines(conn))
