"""`JournalBase`: the rest of `SessionJournal` built on a backend's hooks (the
abstract methods), the keyed lines' lookups by reading every line (a backend
with an index overrides `_keyed`, `_scan` and `append_keyed_unless`)."""

from __future__ import annotations

import abc
import builtins
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TypeVar

from sessionstore.backends.checks import COUNT_MAX, check_reason
from sessionstore.backends.keyed import Keyed, Scanned, check_keys, check_scan, gathered, scanned
from sessionstore.backends.records import journal_line
from sessionstore.effects import EffectLog
from sessionstore.errors import InvalidRecordError
from sessionstore.journal import Journal
from sessionstore.models import Erasure, JournalLine, SessionHeader
from sessionstore.store import SessionJournal

__all__ = ["JournalBase"]

_T = TypeVar("_T")


class JournalBase(SessionJournal, abc.ABC):
    """The shared behaviour of journal backends, a `SessionJournal` (whose docstrings it shows)."""

    @abc.abstractmethod
    async def read_bytes(self) -> bytes: ...

    @abc.abstractmethod
    async def clear(self) -> None: ...

    @abc.abstractmethod
    async def append_raw(self, *lines: bytes) -> None: ...

    @abc.abstractmethod
    async def append_unless(
        self, found: Callable[[Iterator[bytes]], _T | None], *lines: bytes
    ) -> _T | None:
        """Append lines verbatim, all or none, unless ``found``, given the lines
        since the last clear, answers other than None (returned). No other
        append (any thread or process) comes between the look and the append;
        ``found`` may run in a worker thread, under the journal's lock."""

    @abc.abstractmethod
    async def _erase(self, reason: str) -> Erasure | None:
        """`erase` of this journal alone (reason checked)."""

    @abc.abstractmethod
    async def _drop(self, keys: builtins.list[str], reason: str) -> Erasure | None:
        """`drop` of checked arguments, all or nothing."""

    @abc.abstractmethod
    def _effects_journal(self) -> JournalBase:
        """The journal this one keeps its effects in (`sessionstore.effects`)."""

    def _effects_place(self) -> tuple[str | None, tuple[str, ...] | None]:
        """The journal's name and the ``sessionstore`` options opening its store
        (None: out of the command line's reach), for an effect in doubt's commands."""
        return None, None

    @property
    def effects(self) -> EffectLog:
        name, options = self._effects_place()
        return EffectLog(self._effects_journal(), name=name, options=options)

    async def erase(self, *, reason: str) -> Erasure | None:
        check_reason(reason)
        effects = await self._effects_journal()._erase(reason)
        record = await self._erase(reason)
        return effects if record is None else record

    async def read(self) -> Journal:
        return Journal.parse(await self.read_bytes())

    async def read_blocks(self) -> AsyncIterator[bytes]:
        """One piece here; a backend that can stream overrides it."""
        yield await self.read_bytes()

    async def begin(self, header: SessionHeader, leftover: Journal) -> None:
        if not isinstance(header, SessionHeader):
            raise InvalidRecordError(f"expected a SessionHeader, got {type(header).__name__}")
        if leftover.writes() == 0:
            await self.clear()
        await self.append(header)

    async def append(self, line: JournalLine) -> None:
        await self.append_raw(journal_line(line))

    async def keyed(self, *keys: str) -> Keyed:
        return await self._keyed(check_keys(keys))

    async def _keyed(self, keys: builtins.list[str]) -> Keyed:
        if not keys:
            return {}
        return gathered(_split(await self.read_bytes()), keys)

    async def scan(
        self, prefix: str, *, before: str | None = None, limit: int | None = None
    ) -> Scanned:
        check_scan(prefix, before, limit)
        return await self._scan(prefix, before, None if limit is None else min(limit, COUNT_MAX))

    async def _scan(self, prefix: str, before: str | None, limit: int | None) -> Scanned:
        return scanned(gathered(_split(await self.read_bytes())), prefix, before, limit)

    async def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[Keyed], _T | None],
        *lines: bytes,
    ) -> _T | None:
        wanted = check_keys(keys)
        return await self.append_unless(lambda held: found(gathered(held, wanted)), *lines)

    async def drop(self, *keys: str, reason: str) -> Erasure | None:
        check_reason(reason)
        wanted = check_keys(keys)
        if not wanted:
            return None
        return await self._drop(wanted, reason)


def _split(data: bytes) -> Iterator[bytes]:
    """A journal's lines (a torn last one too), without their newlines."""
    pieces = data.split(b"\n")
    if pieces and not pieces[-1]:
        pieces.pop()
    return iter(pieces)
