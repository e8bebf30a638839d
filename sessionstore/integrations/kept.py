"""What a framework adapter converted of a conversation, kept between its reads.

Nothing stored ever changes, so an adapter keeps what it converted and its
next read asks the store only for the entries appended since: `KeptItems`
one item per message entry (openai-agents), `KeptContext` the session's
context (LangChain, pydantic-ai), `Latest` the keepers of the names used
last. Each keeps one session's conversion, replaced whole (or a list
extended under a lock held only while it is), and re-reads the last entry
kept to check its id. docs/integrations.md (What an adapter keeps between
reads) tells the guarantees and the bounds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from sessionstore import (
    EntrySlice,
    Message,
    MessageEntry,
    SessionStore,
    context_entries,
    context_message,
    moves_start,
)

__all__ = [
    "ITEM_BYTES",
    "KEPT",
    "KEPT_BYTES",
    "KEPT_IN_ALL",
    "KeptContext",
    "KeptItems",
    "Latest",
    "weight",
]

KEPT = 20_000
"""Items (or context messages) one conversation keeps at most, the latest."""

KEPT_BYTES = 32 * 2**20
"""What one conversation keeps at most, in bytes as `weight` counts them (the last item always)."""

KEPT_IN_ALL = 100 * 2**20
"""Bytes (as `weight` counts them) a `Latest` keeps at most across its conversations."""

ITEM_BYTES = 1024
"""What `weight` counts for a message beside its strings: the objects around them."""

_REWEIGH = 64  # a `Latest` weighs its values again every this many uses

_T = TypeVar("_T")
_V = TypeVar("_V")
_Out = TypeVar("_Out")

# Items converted, the position of each one's entry, and each one's `weight`.
_Converted: TypeAlias = tuple[tuple[_T, ...], tuple[int, ...], tuple[int, ...]]

_FIRST = 64  # entries read from the end first, for a limited read with nothing kept


def weight(message: Message) -> int:
    """About the bytes a message's conversion keeps: `ITEM_BYTES`, and the
    length of each string it holds (walked without recursion; nothing encoded)."""
    size = ITEM_BYTES
    values: list[object] = [message.content]
    if message.__pydantic_extra__:
        values.extend(message.__pydantic_extra__.values())
    while values:
        value = values.pop()
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, dict):
            size += 16 * len(value)
            values.extend(value.values())
        elif isinstance(value, list | tuple):
            values.extend(value)
    return size


@dataclass(frozen=True)
class _Snapshot(Generic[_T]):
    """The items of ``session_id``'s entries ``start`` to ``stop``, each one's
    entry position and `weight`, and their sum."""

    session_id: str
    start: int
    stop: int
    last_id: str  # the id of entry ``stop - 1``; "" when ``stop`` is 0
    items: tuple[_T, ...]
    positions: tuple[int, ...]
    weights: tuple[int, ...]
    weighs: int


def _last_id(read: EntrySlice) -> str:
    return read.entries[-1].id if read.entries else ""


async def _slice(
    store: SessionStore, session_id: str, start: int, expect_head: str | None
) -> EntrySlice:
    """``load_slice(session_id, start)``, stating ``expect_head`` only when
    given (a store wrapper written before it existed reads on unchanged)."""
    if expect_head is None:
        return await store.load_slice(session_id, start)
    return await store.load_slice(session_id, start, expect_head=expect_head)


async def _since(
    store: SessionStore, kept: _Snapshot[_T] | _Context[_T], expect_head: str | None
) -> EntrySlice | None:
    """The entries appended after ``kept`` (if ``expect_head`` names its
    session: `SessionStore.load_slice`); None when the last one kept is not
    where it was (the session is not the one read)."""
    if kept.stop == 0:
        return await _slice(store, kept.session_id, 0, expect_head)
    read = await _slice(store, kept.session_id, kept.stop - 1, expect_head)
    if not read.entries or read.start != kept.stop - 1 or read.entries[0].id != kept.last_id:
        return None
    return EntrySlice(read.entries[1:], kept.stop, read.length)


class KeptItems(Generic[_T, _Out]):
    """The items of a session's message entries, kept between reads.

    Args:
        convert: an item to keep from a message entry (and its session's id).
        hand_out: what each read hands out for a kept item (a copy, say).
    """

    def __init__(
        self,
        convert: Callable[[str, MessageEntry], _T],
        hand_out: Callable[[_T], _Out],
    ) -> None:
        self._convert = convert
        self._hand_out = hand_out
        self._kept: _Snapshot[_T] | None = None

    @property
    def count(self) -> int:
        """The items kept now."""
        kept = self._kept
        return 0 if kept is None else len(kept.items)

    @property
    def weight(self) -> int:
        """The bytes the items kept now weigh (`weight`), at most about `KEPT_BYTES`."""
        kept = self._kept
        return 0 if kept is None else kept.weighs

    @property
    def session_id(self) -> str | None:
        """The session whose items are kept now; None when none are."""
        kept = self._kept
        return None if kept is None else kept.session_id

    def kept(self, session_id: str) -> tuple[_T, ...] | None:
        """The items kept of ``session_id`` from its first entry on, without a
        read of the store; None when what is kept is another's, or not from its start."""
        kept = self._kept
        if kept is None or kept.session_id != session_id or kept.start != 0:
            return None
        return kept.items

    async def read(
        self,
        store: SessionStore,
        session_id: str,
        limit: int | None,
        *,
        expect_head: str | None = None,
    ) -> list[_Out]:
        """The items of ``session_id``, oldest first: the last ``limit``, or
        all; with ``expect_head``, only if that head names the session as the
        read begins.

        Raises:
            SessionNotFoundError, CorruptSessionError, SessionConflictError:
                as `SessionStore.load_slice`, or what ``convert`` raises.
        """
        kept = await self._refreshed(store, session_id, limit, expect_head)
        if limit is not None and (len(kept.items) >= limit or kept.start == 0):
            items: Sequence[_T] = kept.items[-limit:] if limit else ()
        elif kept.start == 0:
            items = kept.items
        else:  # more than is kept: the rest read, and kept up to the bound
            whole = await self._whole(store, kept)
            self._kept = self._bounded(whole)
            items = whole.items if limit is None else whole.items[-limit:]
        hand_out = self._hand_out
        return [hand_out(item) for item in items]

    async def _refreshed(
        self, store: SessionStore, session_id: str, limit: int | None, expect_head: str | None
    ) -> _Snapshot[_T]:
        kept = self._kept
        if kept is not None and kept.session_id == session_id:
            read = await _since(store, kept, expect_head)
            if read is not None:
                fresh = self._joined(kept, read, self._converted(session_id, read))
                self._kept = fresh
                return fresh
        fresh = await self._first(store, session_id, limit, expect_head)
        self._kept = fresh
        return fresh

    async def _first(
        self, store: SessionStore, session_id: str, limit: int | None, expect_head: str | None
    ) -> _Snapshot[_T]:
        """The whole session, or its end read back until it holds ``limit`` items."""
        if limit is None:
            read = await _slice(store, session_id, 0, expect_head)
        else:
            wanted = _FIRST if limit <= _FIRST else limit
            while True:
                read = await _slice(store, session_id, -wanted, expect_head)
                found = sum(isinstance(entry, MessageEntry) for entry in read.entries)
                if found >= limit or read.start == 0:
                    break
                wanted *= 4
        items, positions, weights = self._converted(session_id, read)
        return self._bounded(
            _Snapshot(
                session_id,
                read.start,
                read.stop,
                _last_id(read),
                items,
                positions,
                weights,
                sum(weights),
            )
        )

    def _converted(self, session_id: str, read: EntrySlice) -> _Converted[_T]:
        convert = self._convert
        items: list[_T] = []
        positions: list[int] = []
        weights: list[int] = []
        for at, entry in enumerate(read.entries, read.start):
            if isinstance(entry, MessageEntry):
                items.append(convert(session_id, entry))
                positions.append(at)
                weights.append(weight(entry.message))
        return tuple(items), tuple(positions), tuple(weights)

    def _joined(self, kept: _Snapshot[_T], read: EntrySlice, new: _Converted[_T]) -> _Snapshot[_T]:
        if not new[0] and read.stop == kept.stop:
            return kept
        joined = _Snapshot(
            kept.session_id,
            kept.start,
            read.stop,
            _last_id(read) or kept.last_id,
            kept.items + new[0],
            kept.positions + new[1],
            kept.weights + new[2],
            kept.weighs + sum(new[2]),
        )
        return self._bounded(joined)

    @staticmethod
    def _bounded(kept: _Snapshot[_T]) -> _Snapshot[_T]:
        """``kept``'s latest items, at most `KEPT` and `KEPT_BYTES` (the last always)."""
        cut, weighs = max(0, len(kept.items) - KEPT), kept.weighs
        weighs -= sum(kept.weights[:cut])
        while weighs > KEPT_BYTES and cut < len(kept.items) - 1:
            weighs -= kept.weights[cut]
            cut += 1
        if not cut:
            return kept
        return _Snapshot(
            kept.session_id,
            kept.positions[cut],
            kept.stop,
            kept.last_id,
            kept.items[cut:],
            kept.positions[cut:],
            kept.weights[cut:],
            weighs,
        )

    async def _whole(self, store: SessionStore, kept: _Snapshot[_T]) -> _Snapshot[_T]:
        """``kept`` with the items before it, from the session's start."""
        read = await store.load_slice(kept.session_id, 0, kept.start)
        items, positions, weights = self._converted(kept.session_id, read)
        return _Snapshot(
            kept.session_id,
            0,
            kept.stop,
            kept.last_id,
            items + kept.items,
            positions + kept.positions,
            weights + kept.weights,
            sum(weights) + kept.weighs,
        )


class KeptContext(Generic[_T]):
    """A session's context (`build_context`), converted, kept between reads.

    The context only grows until a compaction: one list that reads extend,
    each snapshot noting how much of it is its own.

    Args:
        convert: the items of context messages, given the items before them
            (a tool's result may need the call it answers).
    """

    def __init__(self, convert: Callable[[Sequence[Message], Sequence[_T]], list[_T]]) -> None:
        self._convert = convert
        self._kept: _Context[_T] | None = None
        self._extending = threading.Lock()

    @property
    def count(self) -> int:
        """The context messages kept now."""
        kept = self._kept
        return 0 if kept is None else kept.count

    @property
    def weight(self) -> int:
        """The bytes the context messages kept now weigh (`weight`), at most `KEPT_BYTES`."""
        kept = self._kept
        return 0 if kept is None else kept.weighs

    async def read(
        self, store: SessionStore, session_id: str, *, expect_head: str | None = None
    ) -> list[_T]:
        """The converted context of ``session_id``, as `SessionStore.load_context`
        builds it; with ``expect_head``, only if that head names the session
        as the read begins.

        Raises:
            SessionNotFoundError, CorruptSessionError, SessionConflictError:
                as `SessionStore.load_slice`, or what ``convert`` raises.
        """
        kept = self._kept
        if kept is not None and kept.session_id == session_id:
            read = await _since(store, kept, expect_head)
            waiting_for = kept.waiting_for
            if read is not None and not any(
                moves_start(entry.type, entry.id, waiting_for) for entry in read.entries
            ):
                return self._extended(kept, read)
        read = await _slice(store, session_id, 0, expect_head)
        entries, waiting_for = context_entries(read.entries)
        messages = [context_message(entry) for entry in entries]
        context = self._convert(messages, ())
        weighs = sum(map(weight, messages))
        fresh = _Context(
            session_id, read.stop, _last_id(read), waiting_for, context, len(context), weighs
        )
        self._kept = fresh if _fits(fresh) else None
        return list(context)

    def _extended(self, kept: _Context[_T], read: EntrySlice) -> list[_T]:
        messages = [entry.message for entry in read.entries if isinstance(entry, MessageEntry)]
        if not messages and read.stop == kept.stop:
            return kept.items[: kept.count]
        items = kept.items
        added = self._convert(messages, items if len(items) == kept.count else items[: kept.count])
        with self._extending:
            items = kept.items
            if len(items) == kept.count:  # the list is this snapshot's alone: extend it
                items.extend(added)
            else:  # another read extended it first: a list of this read's own
                items = items[: kept.count] + added
            last_id = _last_id(read) or kept.last_id
            weighs = kept.weighs + sum(map(weight, messages))
            count = kept.count + len(added)
            fresh = _Context(
                kept.session_id, read.stop, last_id, kept.waiting_for, items, count, weighs
            )
            self._kept = fresh if _fits(fresh) else None
            return items[: fresh.count]


@dataclass(frozen=True)
class _Context(Generic[_T]):
    """The context of ``session_id`` up to ``stop``: the first ``count`` of ``items``."""

    session_id: str
    stop: int
    last_id: str
    waiting_for: str | None  # as `context_entries` gives it
    items: list[_T]
    count: int
    weighs: int


def _fits(kept: _Context[_T]) -> bool:
    """Whether a context may stay kept: within `KEPT` messages and `KEPT_BYTES`."""
    return kept.count <= KEPT and kept.weighs <= KEPT_BYTES


class Latest(Generic[_V]):
    """The values of the last ``most`` names used, each made by ``make(name)``.

    Args:
        make: makes the value of a name it has none for (any more).
        most: names kept at most; the one used longest ago goes first.
        weigh: the bytes a value keeps; given, the values used longest ago
            also go while all keep more than `KEPT_IN_ALL` (weighed when a
            name is made, and every `_REWEIGH` uses).
    """

    def __init__(
        self, make: Callable[[str], _V], *, most: int, weigh: Callable[[_V], int] | None = None
    ) -> None:
        self._make = make
        self._most = most
        self._weigh = weigh
        self._kept: OrderedDict[str, _V] = OrderedDict()
        self._uses = 0
        self._lock = threading.Lock()  # held to look a name up, never across a read

    @property
    def weight(self) -> int:
        """The bytes its values keep now, as ``weigh`` counts them (0 without it)."""
        weigh = self._weigh
        with self._lock:
            return 0 if weigh is None else sum(map(weigh, self._kept.values()))

    def get(self, name: str) -> _V:
        """The value of ``name``, made now if it has none (any more)."""
        with self._lock:
            self._uses += 1
            value = self._kept.get(name)
            if value is None:
                value = self._kept[name] = self._make(name)
                while len(self._kept) > self._most:
                    self._kept.popitem(last=False)
                weigh_now = True
            else:
                self._kept.move_to_end(name)
                weigh_now = self._uses % _REWEIGH == 0
            if weigh_now and self._weigh is not None:
                self._lighten(self._weigh)
            return value

    def _lighten(self, weigh: Callable[[_V], int]) -> None:
        """Drop the values used longest ago until the rest keep `KEPT_IN_ALL` (the latest stays)."""
        total = sum(weigh(value) for value in self._kept.values())
        while total > KEPT_IN_ALL and len(self._kept) > 1:
            _, value = self._kept.popitem(last=False)
            total -= weigh(value)
