"""`JournalBase`: what a journal backend is built from (see `SessionJournal`).

A journal backend implements `read_bytes`, `append_raw`, `clear`,
`append_unless`, `_erase`, `_drop` and `_effects_journal`; the rest of
`SessionJournal` is built here on those, the keyed lines' lookups by
reading every line (a backend with an index overrides `_keyed`, `_scan`
and `append_keyed_unless`).
"""

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

__all__ = ["JournalBase"]

_T = TypeVar("_T")


class JournalBase(abc.ABC):
    """The shared behaviour of journal backends: `read`, `begin` and `append`
    in terms of `read_bytes`, `clear` and `append_raw`; see `SessionJournal`."""

    @abc.abstractmethod
    async def read_bytes(self) -> bytes:
        """The journal's bytes; see `SessionJournal.read_bytes`."""

    @abc.abstractmethod
    async def clear(self) -> None:
        """Forget the journal; see `SessionJournal.clear`."""

    @abc.abstractmethod
    async def append_raw(self, *lines: bytes) -> None:
        """Append lines verbatim, all or none; see `SessionJournal.append_raw`."""

    @abc.abstractmethod
    async def append_unless(
        self, found: Callable[[Iterator[bytes]], _T | None], *lines: bytes
    ) -> _T | None:
        """Append lines verbatim, all or none, unless the journal already
        says otherwise: ``found`` is given its lines as they stand (since
        its last clear, without newlines) and its answer, when not None, is
        returned with nothing appended. Whole: no other append to the
        journal (from any thread or process) comes between the look and the
        append. ``found`` may run in a worker thread, under the journal's
        lock: it only reads what it is given. What conditional writes to a
        journal (`sessionstore.effects`) rest on."""

    @abc.abstractmethod
    async def _erase(self, reason: str) -> Erasure | None:
        """Remove the journal whole and record it (reason checked); see
        `SessionJournal.erase`."""

    @abc.abstractmethod
    async def _drop(self, keys: builtins.list[str], reason: str) -> Erasure | None:
        """Remove every line under ``keys`` (checked, each once) and record
        it, all or nothing (reason checked); see `SessionJournal.drop`."""

    @abc.abstractmethod
    def _effects_journal(self) -> JournalBase:
        """The journal this one keeps its effects in (`sessionstore.effects`)."""

    def _effects_place(self) -> tuple[str | None, tuple[str, ...] | None]:
        """The journal's name, and the ``sessionstore`` options that open its
        store (None: the command line cannot reach it), for the commands an
        effect in doubt says to run."""
        return None, None

    @property
    def effects(self) -> EffectLog:
        """This journal's effects; see `SessionJournal.effects`."""
        name, options = self._effects_place()
        return EffectLog(self._effects_journal(), name=name, options=options)

    async def erase(self, *, reason: str) -> Erasure | None:
        """Remove the journal whole, and its effects; see `SessionJournal.erase`."""
        check_reason(reason)
        effects = await self._effects_journal()._erase(reason)
        record = await self._erase(reason)
        return effects if record is None else record

    async def read(self) -> Journal:
        """The journal as it stands; see `SessionJournal.read`."""
        return Journal.parse(await self.read_bytes())

    async def read_blocks(self) -> AsyncIterator[bytes]:
        """`read_bytes` in pieces whose concatenation it is: one piece here;
        a backend that can stream overrides it (the archive exports with it)."""
        yield await self.read_bytes()

    async def begin(self, header: SessionHeader, leftover: Journal) -> None:
        """Start a session; see `SessionJournal.begin`."""
        if not isinstance(header, SessionHeader):
            raise InvalidRecordError(f"expected a SessionHeader, got {type(header).__name__}")
        if leftover.writes() == 0:
            await self.clear()
        await self.append(header)

    async def append(self, line: JournalLine) -> None:
        """Append one line durably; see `SessionJournal.append`."""
        await self.append_raw(journal_line(line))

    # ------------------------------------------------ keyed lines

    async def keyed(self, *keys: str) -> Keyed:
        """The lines under each key; see `SessionJournal.keyed`.

        Here by reading every line (`read_bytes`); a backend with an index
        overrides `_keyed`.
        """
        return await self._keyed(check_keys(keys))

    async def _keyed(self, keys: builtins.list[str]) -> Keyed:
        """`keyed` of checked keys, each once."""
        if not keys:
            return {}
        return gathered(_split(await self.read_bytes()), keys)

    async def scan(
        self, prefix: str, *, before: str | None = None, limit: int | None = None
    ) -> Scanned:
        """The keys starting with ``prefix``, last first; see `SessionJournal.scan`.

        Here by reading every line; a backend with an index overrides `_scan`.
        """
        check_scan(prefix, before, limit)
        return await self._scan(prefix, before, None if limit is None else min(limit, COUNT_MAX))

    async def _scan(self, prefix: str, before: str | None, limit: int | None) -> Scanned:
        """`scan` of checked arguments."""
        return scanned(gathered(_split(await self.read_bytes())), prefix, before, limit)

    async def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[Keyed], _T | None],
        *lines: bytes,
    ) -> _T | None:
        """`append_unless` given only the lines under ``keys``; see
        `SessionJournal.append_keyed_unless`.

        Here by `append_unless` (every line read under the journal's lock);
        a backend with an index overrides it.
        """
        wanted = check_keys(keys)
        return await self.append_unless(lambda held: found(gathered(held, wanted)), *lines)

    async def drop(self, *keys: str, reason: str) -> Erasure | None:
        """Remove every line under ``keys``, recorded; see `SessionJournal.drop`."""
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
