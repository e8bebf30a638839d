"""A LangGraph messages channel kept as a session's entries (`StoreSaver`).

A checkpoint holds the channel as a `Position`. Writing a checkpoint's list
compares it with its parent's: an extension is appended to the parent's
session while that still ends where the parent left it (``expect_last``),
else to a fork made there; a list that differs before the parent's end
goes on in a fork made just before the first difference. So each message
is stored once, and no history is copied. Every session a thread makes is
recorded in its journal before it is made, so that deleting the thread
finds it.

What was converted is kept: per session, the entries' LangChain messages
(`KeptItems`), and per thread and namespace the list of the checkpoint last
written or read. The messages handed out are those kept objects, not
copies (2,000 cost some 6 ms, more than the rest of a turn): nodes replace
LangGraph's state, never change it in place.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from langchain_core.messages import BaseMessage

import sessionstore.integrations.langgraph_records as records
from sessionstore import (
    CorruptSessionError,
    DuplicateSessionError,
    MessageEntry,
    SessionConflictError,
    SessionMeta,
    SessionStore,
)
from sessionstore.integrations.conversation import first_id
from sessionstore.integrations.kept import KeptItems, Latest
from sessionstore.integrations.langchain import from_context, to_message
from sessionstore.integrations.langgraph_records import Position

__all__ = ["RECENT_MESSAGES", "Listed", "Messages"]


@dataclass(frozen=True)
class Listed:
    """A checkpoint's messages, and the ids of the entries holding them."""

    ids: tuple[str, ...] = ()
    messages: tuple[BaseMessage, ...] = ()

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, BaseMessage]]) -> Listed:
        return cls(tuple(map(_FIRST, pairs)), tuple(map(_SECOND, pairs)))


_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)

_RECENT = 256
"""Threads (and namespaces) whose latest list a saver keeps."""

RECENT_MESSAGES = 100_000
"""Messages those lists hold at most in all (the latest always stays)."""


@dataclass(frozen=True)
class _Seen:
    checkpoint_id: str
    position: Position
    listed: Listed


def _convert(session_id: str, entry: MessageEntry) -> tuple[str, BaseMessage]:
    return entry.id, from_context([entry.message])[0]


def _same(item: tuple[str, BaseMessage]) -> tuple[str, BaseMessage]:
    return item


class Messages:
    """The messages channels of one saver's threads, in its store's sessions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # held to look up or note, never across a read
        self._recent: OrderedDict[tuple[str, str], _Seen] = OrderedDict()
        self.drop()

    @property
    def held(self) -> int:
        """The messages the lists of the latest checkpoints kept here hold."""
        return self._held

    def drop(self) -> None:
        """Forget every conversion kept."""
        self._kept: Latest[KeptItems[tuple[str, BaseMessage], tuple[str, BaseMessage]]] = Latest(
            lambda _: KeptItems(_convert, _same), most=_RECENT, weigh=attrgetter("weight")
        )
        # The last session's kept items, split into ids and messages: the
        # checkpoints of a listing slice it.
        self._split: tuple[Sequence[tuple[str, BaseMessage]], Listed] | None = None
        with self._lock:
            self._recent.clear()
            self._held = 0  # the messages the lists of _recent hold

    def recent(self, thread: str, ns: str, checkpoint_id: str) -> Position | None:
        """The position of ``checkpoint_id`` if it is the last one seen here."""
        seen = self._seen(thread, ns, checkpoint_id)
        return None if seen is None else seen.position

    async def read(
        self, store: SessionStore, thread: str, ns: str, checkpoint_id: str, position: Position
    ) -> list[BaseMessage]:
        """The messages at ``position``, the checkpoint ``checkpoint_id``'s.

        Raises:
            CorruptSessionError: the session holds fewer messages than that.
            SessionNotFoundError: as `SessionStore.load_slice`.
        """
        listed = await self._listed(store, thread, ns, checkpoint_id, position)
        self._note(thread, ns, _Seen(checkpoint_id, position, listed))
        return list(listed.messages)

    async def write(
        self,
        store: SessionStore,
        thread: str,
        ns: str,
        name: str | None,
        parent: tuple[str, Position] | None,
        messages: Sequence[BaseMessage],
        record: Callable[[str], Awaitable[None]],
    ) -> tuple[Position, Listed]:
        """Store ``messages``, the list of a checkpoint whose parent (id and
        position) is ``parent``; return where it stands and the messages with
        their entries' ids (for `note`). ``name`` is the conversation;
        ``record`` notes a session id in the thread's journal before it is made.

        Raises:
            InvalidRecordError: a message the wire format cannot carry; nothing written.
        """
        mark = records.session_mark(thread, ns)
        before = Listed()
        if parent is not None and parent[1].count:
            before = await self._listed(store, thread, ns, parent[0], parent[1])
        same = len(before.messages)
        # The list a graph extends holds the very objects it was given: one
        # pass at C speed tells it; otherwise compare message by message.
        identical = len(messages) >= same and all(map(operator.is_, messages, before.messages))
        if not identical:
            same, limit = 0, min(same, len(messages))
            while same < limit and (
                messages[same] is before.messages[same] or messages[same] == before.messages[same]
            ):
                same += 1
        # Converted before anything is written: one that cannot be stores none.
        entries = [MessageEntry.new(to_message(message)) for message in messages[same:]]
        at = parent[1] if parent is not None else Position(None, 0, "")
        if same == len(before.messages) and at.session is not None:  # it extends the parent's
            session = at.session
            if entries:
                try:
                    await store.append_many(session, entries, expect_last=at.last)
                except SessionConflictError:  # appended to since: go on in a fork
                    session = await self._branch(store, name, session, at.last, record, mark)
                    await store.append_many(session, entries)
        elif same == len(before.messages):  # the first messages of the conversation
            if not entries:
                return Position(None, 0, ""), Listed()
            session = await self._first(store, name, record, mark)
            await store.append_many(session, entries)
        else:  # it differs before the parent's end: fork just before
            assert at.session is not None
            cut = before.ids[same - 1] if same else ""
            session = await self._branch(store, name, at.session, cut, record, mark)
            if entries:
                await store.append_many(session, entries)
        kept = before.messages[:same] if identical else tuple(messages[:same])
        listed = Listed(
            before.ids[:same] + tuple(entry.id for entry in entries),
            kept + tuple(messages[same:]),
        )
        last = entries[-1].id if entries else (before.ids[same - 1] if same else "")
        return Position(session, len(listed.ids), last), listed

    # ------------------------------------------------------------ sessions

    async def _first(
        self,
        store: SessionStore,
        name: str | None,
        record: Callable[[str], Awaitable[None]],
        mark: dict[str, Any],
    ) -> str:
        """A new session for a conversation's first messages: the conversation's
        first id (``name``, or on a scoped store its prefix + ``name``) if free.

        That id is noted once made (one that exists may be another's); a crash
        between leaves it unnoted, and its header (``mark``) tells it the thread's."""
        if name is not None:
            first = first_id(store, name)
            meta = SessionMeta.new(metadata=mark).model_copy(update={"id": first})
            try:
                await store.create(meta)
            except DuplicateSessionError:  # used before (or by another writer): a new one
                pass
            else:
                await record(meta.id)
                await store.set_head(name, meta.id)
                return meta.id
        meta = SessionMeta.new(metadata=mark)
        await record(meta.id)
        await store.create(meta)
        if name is not None:
            await store.set_head(name, meta.id)
        return meta.id

    async def _branch(
        self,
        store: SessionStore,
        name: str | None,
        source: str,
        at: str,
        record: Callable[[str], Awaitable[None]],
        mark: dict[str, Any],
    ) -> str:
        """A fork of ``source`` up to entry ``at`` ("": an empty child); the head moves there."""
        meta = SessionMeta.new(parent_session=source, metadata=mark)
        await record(meta.id)
        if at:
            await store.fork(source, at=at, meta=meta)
        else:
            await store.create(meta)
        if name is not None:
            await store.set_head(name, meta.id)
        return meta.id

    # ------------------------------------------------------------ kept

    async def _listed(
        self, store: SessionStore, thread: str, ns: str, checkpoint_id: str, position: Position
    ) -> Listed:
        if not position.count or position.session is None:
            return Listed()
        seen = self._seen(thread, ns, checkpoint_id)
        if seen is not None and seen.position == position:
            return seen.listed
        kept = self._kept.get(position.session)
        items: Sequence[tuple[str, BaseMessage]] | None = kept.kept(position.session)
        if (
            items is None
            or len(items) < position.count
            or items[position.count - 1][0] != position.last
        ):
            items = await kept.read(store, position.session, None)
        if len(items) < position.count or items[position.count - 1][0] != position.last:
            raise CorruptSessionError(
                position.session,
                f"holds fewer than the {position.count} messages of thread {thread!r}, "
                f"checkpoint {checkpoint_id!r} (ending in entry {position.last!r})",
            )
        split = self._split
        if split is None or split[0] is not items:  # split once for all its checkpoints
            split = self._split = (items, Listed.of(items))
        whole = split[1]
        return Listed(whole.ids[: position.count], whole.messages[: position.count])

    def _seen(self, thread: str, ns: str, checkpoint_id: str) -> _Seen | None:
        with self._lock:
            seen = self._recent.get((thread, ns))
        return seen if seen is not None and seen.checkpoint_id == checkpoint_id else None

    def _note(self, thread: str, ns: str, seen: _Seen) -> None:
        with self._lock:
            replaced = self._recent.pop((thread, ns), None)
            if replaced is not None:
                self._held -= len(replaced.listed.messages)
            self._recent[(thread, ns)] = seen
            self._held += len(seen.listed.messages)
            while len(self._recent) > 1 and (
                len(self._recent) > _RECENT or self._held > RECENT_MESSAGES
            ):
                _, gone = self._recent.popitem(last=False)
                self._held -= len(gone.listed.messages)

    def carry(self, thread: str, ns: str, parent_id: str, checkpoint_id: str) -> None:
        """The checkpoint was stored with its parent's messages unchanged: keep them as its."""
        seen = self._seen(thread, ns, parent_id)
        if seen is not None:
            self._note(thread, ns, _Seen(checkpoint_id, seen.position, seen.listed))

    def note(
        self, thread: str, ns: str, checkpoint_id: str, position: Position, listed: Listed
    ) -> None:
        """Keep ``listed``, the messages of the checkpoint just stored, for the next write."""
        self._note(thread, ns, _Seen(checkpoint_id, position, listed))
