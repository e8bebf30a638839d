"""The contexts a store built, cached for its next `load_context` (bounded).

An agent asks for its context every turn, after adding a message or two. A
store caches each context with how far into the session it was built (its
*extent*), and the next call reads only what lies past it: a log only
grows, so messages appended since extend the context, unless one moves its
start (`moves_start`) and it is built again. Beside each message a context
keeps its entry's id (the summary's: its compaction's), and the id of the
last entry read, which a compaction expects to end the session.

One `ContextCache` per store object, emptied by its `drop_caches`. What it
buys (benchmarks/caches.py, JSONL): a context asked again 0.12 ms against
1.0 ms read again at 1,000 entries, 0.15 against 0.71 ms at 100,000.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from sessionstore.context import context_entries, context_message, moves_start
from sessionstore.models import CompactionEntry, Message, MessageEntry, SessionEntry

__all__ = [
    "CACHED_MESSAGES",
    "CACHED_SESSIONS",
    "BuiltContext",
    "ContextCache",
    "built_from",
]

CACHED_SESSIONS = 256
CACHED_MESSAGES = 20_000  # a few megabytes of messages at most, besides the callers' own

_S = TypeVar("_S", bound=Hashable)


@dataclass(frozen=True)
class BuiltContext(Generic[_S]):
    """A context as built up to ``extent``."""

    stamp: _S  # what the extent is counted in: a SQL session's key, a file's identity
    extent: int  # how far it was built: a last ``seq``, a count of bytes
    messages: tuple[Message, ...]
    ids: tuple[str, ...]  # each message's entry id; the summary's is its compaction's
    summarized: bool  # whether ``messages[0]`` is the last compaction's summary
    waiting_for: str | None  # the kept id no message had yet
    last: str  # the id of the session's last entry read ("" for none): what a compaction expects

    @classmethod
    def of(
        cls, stamp: _S, extent: int, entries: Sequence[SessionEntry], last: str
    ) -> BuiltContext[_S]:
        """The context of ``entries`` (`context_entries`: a whole log, or its end
        from the context's start), built up to ``extent``."""
        kept, waiting_for = context_entries(entries)
        summarized = bool(kept) and isinstance(kept[0], CompactionEntry)
        messages = tuple(map(context_message, kept))
        ids = tuple(entry.id for entry in kept)
        return cls(stamp, extent, messages, ids, summarized, waiting_for, last)

    def extended(self, extent: int, new: Sequence[SessionEntry]) -> BuiltContext[_S] | None:
        """The context with ``new`` entries after it; None when one moves its start."""
        if any(moves_start(entry.type, entry.id, self.waiting_for) for entry in new):
            return None
        added = [entry for entry in new if isinstance(entry, MessageEntry)]
        return BuiltContext(
            self.stamp,
            extent,
            self.messages + tuple(entry.message for entry in added),
            self.ids + tuple(entry.id for entry in added),
            self.summarized,
            self.waiting_for,
            new[-1].id if new else self.last,
        )


def built_from(entries: Sequence[SessionEntry]) -> BuiltContext[None]:
    """The context of a whole log, each message with its entry id."""
    return BuiltContext.of(None, len(entries), entries, entries[-1].id if entries else "")


class ContextCache(Generic[_S]):
    """The contexts of one store, the most recently cached last (thread-safe)."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, BuiltContext[_S]] = OrderedDict()
        self._messages = 0
        self._lock = threading.Lock()

    def get(self, session_id: str) -> BuiltContext[_S] | None:
        with self._lock:
            return self._held.get(session_id)

    def put(self, session_id: str, built: BuiltContext[_S]) -> None:
        """Cache ``built``, unless a context built further was cached meanwhile."""
        with self._lock:
            held = self._held.get(session_id)
            if held is not None and held.stamp == built.stamp and held.extent > built.extent:
                return
            if held is not None:
                self._messages -= len(self._held.pop(session_id).messages)
            if len(built.messages) > CACHED_MESSAGES:
                return
            self._held[session_id] = built
            self._messages += len(built.messages)
            while len(self._held) > CACHED_SESSIONS or self._messages > CACHED_MESSAGES:
                self._messages -= len(self._held.popitem(last=False)[1].messages)

    def discard(self, session_id: str) -> None:
        """Forget the context of ``session_id`` (erased...), if one is cached."""
        with self._lock:
            held = self._held.pop(session_id, None)
            if held is not None:
                self._messages -= len(held.messages)

    def held(self) -> dict[str, BuiltContext[_S]]:
        with self._lock:
            return dict(self._held)

    @property
    def messages(self) -> int:
        with self._lock:
            return self._messages

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._messages = 0
