"""The journals of a `MemoryStore`: each one's history (every line, and a
marker where it was cleared) and beside it each key's lines since the last
clear, kept up by every write, so that `keyed` and `scan` cost what they return.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sessionstore.backends.base import JournalBase
from sessionstore.backends.keyed import Keyed, Scanned, check_keys, dropped, scanned
from sessionstore.backends.records import (
    erasure_of,
    journal_bytes,
    lines_since_clear,
    raw_journal_lines,
)
from sessionstore.effects import EFFECTS_SUFFIX
from sessionstore.models import Erasure
from sessionstore.wire import line_key

__all__ = ["MemoryJournal", "MemoryJournals", "yielding"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound=type)


def yielding(cls: _C) -> _C:
    """Give the event loop a turn at the start of each operation of ``cls``:
    nothing in memory awaits, so a task running many operations in a row
    would otherwise keep every other task waiting."""
    for name, method in builtins.list(vars(cls).items()):
        if inspect.iscoroutinefunction(method):
            setattr(cls, name, _turn_first(method))
        elif inspect.isasyncgenfunction(method):
            setattr(cls, name, _turn_first_stream(method))
    return cls


def _turn_first(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def turn_first(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await method(*args, **kwargs)

    return turn_first


def _turn_first_stream(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def turn_first(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        await asyncio.sleep(0)
        async with contextlib.aclosing(method(*args, **kwargs)) as items:
            async for item in items:
                yield item

    return turn_first


@dataclass
class _Lines:
    history: builtins.list[bytes | None] = field(default_factory=builtins.list)
    keys: Keyed = field(default_factory=dict)

    def extend(self, lines: builtins.list[bytes]) -> None:
        self.history.extend(lines)
        for line in lines:
            key = line_key(line)
            if key is not None:
                self.keys.setdefault(key, []).append(line)

    def clear(self) -> None:
        if self.history and self.history[-1] is not None:
            self.history.append(None)
        self.keys.clear()


@dataclass
class MemoryJournals:
    """A store's journals, by name, and the erasure records they leave."""

    erasures: builtins.list[Erasure]
    by_name: dict[str, _Lines] = field(default_factory=dict)
    # Held by a conditional write (and a drop), from its look to its write:
    # threads sharing the store (the blocking facade's) take turns.
    lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> builtins.list[str]:
        found = (name.removesuffix(EFFECTS_SUFFIX) for name in self.by_name)
        return builtins.list(dict.fromkeys(found))

    def journal(self, name: str, check_open: Callable[[], None]) -> MemoryJournal:
        return MemoryJournal(self, name, check_open)


@yielding
class MemoryJournal(JournalBase):
    """A view of one of a `MemoryStore`'s journals."""

    def __init__(self, journals: MemoryJournals, name: str, check_open: Callable[[], None]):
        self._journals = journals
        self._name = name
        self._check_open = check_open

    def _held(self) -> _Lines:
        return self._journals.by_name.setdefault(self._name, _Lines())

    def _found(self) -> _Lines:
        return self._journals.by_name.get(self._name) or _Lines()  # none yet: empty, not kept

    async def read_bytes(self) -> bytes:
        self._check_open()
        return journal_bytes(lines_since_clear(self._found().history))

    async def append_raw(self, *lines: bytes) -> None:
        checked = raw_journal_lines(lines)
        self._check_open()
        with self._journals.lock:
            self._held().extend(checked)

    async def append_unless(
        self, found: Callable[[Iterator[bytes]], _T | None], *lines: bytes
    ) -> _T | None:
        checked = raw_journal_lines(lines)
        self._check_open()
        with self._journals.lock:
            held = self._held()
            seen = found(iter(lines_since_clear(held.history)))
            if seen is None:
                held.extend(checked)
            return seen

    async def _keyed(self, keys: builtins.list[str]) -> Keyed:
        self._check_open()
        with self._journals.lock:
            return self._looked(keys)

    def _looked(self, keys: builtins.list[str]) -> Keyed:
        held = self._found()
        return {key: builtins.list(held.keys[key]) for key in keys if key in held.keys}

    async def _scan(self, prefix: str, before: str | None, limit: int | None) -> Scanned:
        self._check_open()
        with self._journals.lock:
            found = scanned(self._found().keys, prefix, before, limit)
            return [(key, builtins.list(lines)) for key, lines in found]

    async def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[Keyed], _T | None],
        *lines: bytes,
    ) -> _T | None:
        wanted = check_keys(keys)
        checked = raw_journal_lines(lines)
        self._check_open()
        with self._journals.lock:
            seen = found(self._looked(wanted))
            if seen is None:
                self._held().extend(checked)
            return seen

    async def _drop(self, keys: builtins.list[str], reason: str) -> Erasure | None:
        self._check_open()
        wanted = set(keys)
        with self._journals.lock:
            held = self._found()
            gone = [line for line in held.history if line is not None and line_key(line) in wanted]
            if not gone:
                return None
            record = dropped(self._name, reason, gone, len({line_key(line) for line in gone}))
            held.history = [
                line for line in held.history if line is None or line_key(line) not in wanted
            ]
            for key in keys:
                held.keys.pop(key, None)
            self._journals.erasures.append(record)
            return record

    def _effects_place(self) -> tuple[str | None, tuple[str, ...] | None]:
        return self._name, None  # no other process sees a memory store

    def _effects_journal(self) -> MemoryJournal:
        return MemoryJournal(self._journals, self._name + EFFECTS_SUFFIX, self._check_open)

    async def clear(self) -> None:
        self._check_open()
        with self._journals.lock:
            self._found().clear()

    async def _erase(self, reason: str) -> Erasure | None:
        self._check_open()
        with self._journals.lock:
            held = self._found()
            if not held.history:
                return None
            lines = [line for line in held.history if line is not None]
            record = erasure_of("journal", self._name, reason, [journal_bytes(lines)], len(lines))
            del self._journals.by_name[self._name]
            self._journals.erasures.append(record)
            return record
