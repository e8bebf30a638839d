"""An owner's journal, seen through a `sessionstore.scoped.ScopedStore`."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import TypeVar

from sessionstore.effects import EffectLog
from sessionstore.journal import Journal
from sessionstore.models import Erasure, JournalLine, SessionHeader
from sessionstore.store import SessionJournal

__all__ = ["ScopedJournal", "named"]

_T = TypeVar("_T")


def named(record: Erasure, prefix: str) -> Erasure:
    """A journal's erasure record, naming the journal as its owner does."""
    return record.model_copy(update={"name": record.name.removeprefix(prefix)})


class ScopedJournal(SessionJournal):
    """An owner's journal: the store's, its erasure records naming it as the owner does."""

    def __init__(self, journal: SessionJournal, prefix: str) -> None:
        self._journal = journal
        self._prefix = prefix

    async def read(self) -> Journal:
        return await self._journal.read()

    async def begin(self, header: SessionHeader, leftover: Journal) -> None:
        await self._journal.begin(header, leftover)

    async def append(self, line: JournalLine) -> None:
        await self._journal.append(line)

    async def append_raw(self, *lines: bytes) -> None:
        await self._journal.append_raw(*lines)

    async def read_bytes(self) -> bytes:
        return await self._journal.read_bytes()

    async def clear(self) -> None:
        await self._journal.clear()

    async def keyed(self, *keys: str) -> dict[str, builtins.list[bytes]]:
        return await self._journal.keyed(*keys)

    async def scan(
        self, prefix: str, *, before: str | None = None, limit: int | None = None
    ) -> builtins.list[tuple[str, builtins.list[bytes]]]:
        return await self._journal.scan(prefix, before=before, limit=limit)

    async def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[dict[str, builtins.list[bytes]]], _T | None],
        *lines: bytes,
    ) -> _T | None:
        return await self._journal.append_keyed_unless(keys, found, *lines)

    async def drop(self, *keys: str, reason: str) -> Erasure | None:
        record = await self._journal.drop(*keys, reason=reason)
        return None if record is None else named(record, self._prefix)

    @property
    def effects(self) -> EffectLog:
        return self._journal.effects

    async def erase(self, *, reason: str) -> Erasure | None:
        record = await self._journal.erase(reason=reason)
        return None if record is None else named(record, self._prefix)
