"""`SqlJournal`: a session journal kept in the ``journal_lines`` table.

One row per line, in ``seq`` order; a clear is a row whose ``line`` is
NULL, so the history stays (the table is append-only like the others).
`read` parses the lines after the last clear exactly as a journal file
holding them would be parsed. Every write commits with a full fsync
(``synchronous=FULL`` for that transaction on SQLite, always on
PostgreSQL), even in a store opened with ``durability="normal"``: an append
that returned survives a power loss.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection

from sessionstore.backends._journal import JournalBase, file_bytes, raw_lines
from sessionstore.backends.sql import queries as Q

if TYPE_CHECKING:
    from sessionstore.backends.sql.store import SqlStore

__all__ = ["SqlJournal"]


class SqlJournal(JournalBase):
    """A journal in a `SqlStore`; see `SessionJournal` for the contract."""

    def __init__(self, store: SqlStore, name: str) -> None:
        self._store = store
        self._name = name

    def __repr__(self) -> str:
        return f"SqlJournal({self._store!r}, {self._name!r})"

    async def read_bytes(self) -> bytes:
        self._store._check_open(self._name)

        def body(conn: Connection) -> list[bytes]:
            return [line for (line,) in Q.JOURNAL_LINES.all(conn, name=self._name)]

        return file_bytes(await self._store._transaction(self._name, body))

    async def _add(self, lines: list[bytes | None]) -> None:
        """Append rows (None: a clear marker, written only when it changes something)."""
        self._store._check_open(self._name)

        def body(conn: Connection) -> None:
            if conn.dialect.name == "postgresql":
                # Writers of one journal queue here; SQLite's BEGIN IMMEDIATE
                # already lets one writer in at a time.
                Q.LOCK_JOURNAL.first(conn, name=self._name)
            last = Q.JOURNAL_LAST_ROW.first(conn, name=self._name)
            if lines == [None] and (last is None or last[1] is None):
                return  # nothing to clear
            seq = 0 if last is None else last[0]
            rows = [
                {"journal": self._name, "seq": seq + n, "line": line}
                for n, line in enumerate(lines, 1)
            ]
            Q.INSERT_JOURNAL_LINES.many(conn, rows)

        await self._store._transaction(self._name, body, write=True, durable=True)

    async def append_raw(self, *lines: bytes) -> None:
        checked: list[bytes | None] = [*raw_lines(lines)]
        if checked:
            await self._add(checked)

    async def clear(self) -> None:
        await self._add([None])
