"""A conversation kept under a named head, whose edits hold under any concurrency.

What a framework's session slot asks of a store (add to the conversation,
take its last item back, start it over) over an append-only store: the
conversation's name is a head (`SessionStore.set_head`) naming its current
session, and nothing is ever deleted.

Any number of `Conversation` objects, in any threads, event loops and
processes, may edit one conversation at once: no lock is held, and each
edit states what it read (``expect_head``, ``expect``, ``expect_last``) for
the store to check in the same step as it writes, reading again when it is
refused. So the edits are linearizable; docs/integrations.md (Guarantees)
tells what each one promises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import sessionstore.integrations.turns as turns
from sessionstore import (
    DuplicateSessionError,
    InvalidRecordError,
    InvalidSessionIdError,
    MessageEntry,
    ScopedStore,
    SessionConflictError,
    SessionEntry,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    encode,
    validate_session_id,
)

__all__ = ["Conversation", "Popped", "check_scoped_name", "first_id"]

_T = TypeVar("_T")

_END = 64  # the last entries an append leaves known, at most


def first_id(store: SessionStore, name: str) -> str:
    """The id of the first session of the conversation ``name`` on ``store``:
    ``name`` itself, or on a `ScopedStore` ``prefix + name`` (as its head is
    named in the store under it), so that two owners' conversations of one
    name never meet at one session id, which every owner shares.

    Raises:
        InvalidSessionIdError: ``name`` breaks the session-id rule, or on a
            scoped store is too long to hold the prefix as well.
    """
    validate_session_id(name)
    if not isinstance(store, ScopedStore):
        return name
    return _prefixed(store.prefix, name)


def check_scoped_name(name: str) -> str:
    """Refuse up front a conversation name no scoped store's prefix leaves
    room for (all prefixes are `ScopedStore.PREFIX_BYTES` long).

    Raises:
        InvalidSessionIdError: as `first_id` would on any scoped store.
    """
    validate_session_id(name)
    _prefixed("x" * ScopedStore.PREFIX_BYTES, name)
    return name


def _prefixed(prefix: str, name: str) -> str:
    try:
        return validate_session_id(prefix + name)
    except InvalidSessionIdError as exc:
        raise InvalidSessionIdError(
            name, f"with a scoped store's prefix of {len(prefix)} bytes: {exc.reason}"
        ) from None


@dataclass(frozen=True)
class Popped:
    """What `Conversation.pop` took off, and the session that still holds it."""

    entry: MessageEntry
    session_id: str


class Conversation:
    """The conversation ``name`` in ``store``: its current session is the one
    the head ``name`` names.

    Args:
        store: any store; the caller keeps it open.
        name: the conversation's name, the head's (the session-id rule applies).
        first_id: the id of its first session, made by the first `add` (or
            continued, when it exists; reads take it before any head).
        seen: where the head stood when last seen (by another object on
            the store, say): the first read and add try it, checking it.

    Raises:
        InvalidSessionIdError: ``name``, ``first_id`` or ``seen`` breaks the session-id rule.
    """

    def __init__(
        self, store: SessionStore, name: str, *, first_id: str, seen: str | None = None
    ) -> None:
        self.store = store
        self.name = validate_session_id(name)
        self.first_id = validate_session_id(first_id)
        # The session the head named when this object last saw it: where
        # `add` appends and `read` reads first, sparing a read of the head
        # (each states it expects the head there, so a stale guess costs one
        # retry); and the last entries known to end it, as this object's
        # last append left it (an append expecting its last entry checks it).
        self._seen = None if seen is None else validate_session_id(seen)
        self._end: tuple[str, tuple[SessionEntry, ...]] | None = None

    def __repr__(self) -> str:
        return f"Conversation({self.store!r}, {self.name!r})"

    async def current(self) -> str | None:
        """The current session's id, without writing; None before the first `add`."""
        return (await self._read())[1]

    async def read(self, reading: Callable[[str, str | None], Awaitable[_T]]) -> _T | None:
        """What ``reading(session, expect_head)`` reads of the current session;
        None before the first `add`.

        Where the head was last seen, ``reading`` is told the head's name,
        for its first read to pass as ``expect_head`` (one step in all), and
        is called again where the head stands when it refuses; else it is
        called with None once the head is read.

        Raises:
            what ``reading`` raises but a refused ``expect_head``.
        """
        guessed = self._seen
        while guessed is not None:
            try:
                return await reading(guessed, self.name)
            except SessionConflictError as exc:
                if exc.what != "head" or exc.session_id != self.name:
                    raise
                guessed = self._seen = exc.actual
            except SessionNotFoundError:
                guessed = self._seen = None  # erased since it was seen
        current = await self.current()
        return None if current is None else await reading(current, None)

    async def add(self, entries: Sequence[SessionEntry]) -> str:
        """Append ``entries`` to the current session, all or none, creating the
        first session on first use; returns the session appended to.

        Raises:
            as `SessionStore.append_many` (nothing is stored, no first session made).
        """
        target = self._seen or await self._start(entries)
        while True:
            try:
                await self.store.append_many(target, entries, expect_head=self.name)
                self._seen = target
                self._ended(target, (), entries)  # it ends so now, whatever came before
                return target
            except SessionNotFoundError:
                if target != self._seen:
                    raise
                self._seen = self._end = None  # erased since it was seen: ask the head again
                target = await self._start(entries)
            except SessionConflictError as exc:
                if exc.what != "head" or exc.actual is None:
                    raise
                target = exc.actual  # moved meanwhile: where it stands now

    async def add_input(self, entries: Sequence[SessionEntry]) -> bool:
        """`add` a turn's input, unless the open turn began with it (a rerun
        after a crash, `turns.resumes`); the check and the append are one
        step (``expect_last``). Returns whether ``entries`` were stored.

        Raises:
            as `add`.
        """
        if not turns.is_input(entries):
            await self.add(entries)
            return True
        enough = turns.tells_a_resume(len(entries))
        while True:
            # Where the head was last seen, as `add` does, and with the end
            # this object's last append left when it tells a resume: the
            # append states both, so a stale guess costs one retry.
            guessed = current = self._seen
            if current is None:
                head, current = await self._read()
                if head is None or current is None:  # no head yet: the first add sets it
                    await self.add(entries)
                    return True
            known = self._known_end(current)
            if known is not None and enough(known):
                tail = known
            else:
                tail, _ = await turns.read_tail(self.store, current, enough, len(entries))
            if turns.resumes(tail, entries):
                if guessed is not None or tail is known:  # told only as read where the head stands
                    self._seen = self._end = None
                    continue
                return False
            try:
                await self.store.append_many(
                    current, entries, expect_head=self.name, expect_last=tail[-1].id if tail else ""
                )
            except (SessionConflictError, SessionNotFoundError):
                # Moved, appended to or erased since it was read: read the head again.
                self._seen = self._end = None
                continue
            self._seen = current
            self._ended(current, tail, entries)
            return True

    async def pop(self) -> Popped | None:
        """Take the last message off: the head moves to a fork just before it
        (or a new empty session) if nothing changed since the read.

        Returns:
            What was taken; None when the current session holds no message.

        Raises:
            CorruptSessionError: the session does not decode.
        """
        while True:
            head, current = await self._read()
            if current is None:
                return None
            entries = await self.store.load(current)
            last = next(
                (i for i in range(len(entries) - 1, -1, -1) if _is_message(entries[i])), None
            )
            if last is None:
                return None
            entry = entries[last]
            assert isinstance(entry, MessageEntry)
            branch = await self._branch(current, entries[:last])
            if await self._move(head, current, entries, branch):
                return Popped(entry, current)

    async def clear(self) -> None:
        """Start the conversation over in a new empty session whose parent is
        the current one, losing nothing; nothing to do when it holds no entry."""
        while True:
            head, current = await self._read()
            if current is None:
                return
            entries = await self.store.load(current)
            if not entries:
                return
            fresh = await self.store.create(SessionMeta.new(parent_session=current))
            if await self._move(head, current, entries, fresh):
                return

    # ------------------------------------------------------------ reading

    async def _read(self) -> tuple[str | None, str | None]:
        """Where the head stands (None before it is set), and the current session."""
        head = await self.store.head(self.name)
        if head is not None:
            self._seen = head
            return head, head
        exists = await self._exists(self.first_id)
        return None, self.first_id if exists else None

    async def _start(self, entries: Sequence[SessionEntry]) -> str:
        """The current session, on first use the first one created and the
        head set to it (racing first uses agree), once ``entries`` encode."""
        head = await self.store.head(self.name)
        if head is not None:
            return head
        for entry in entries:  # a refused first add leaves nothing behind
            try:
                encode(entry)
            except InvalidRecordError as exc:
                where = f"session {self.first_id!r}, entry {entry.id!r}"
                raise InvalidRecordError(f"{where}: {exc}") from None
        first = SessionMeta.new().model_copy(update={"id": self.first_id})
        with contextlib.suppress(DuplicateSessionError):  # another writer made it
            await self.store.create(first)
        try:
            await self.store.set_head(self.name, self.first_id, expect=None)
        except SessionConflictError as exc:  # another writer set it first
            if exc.actual is None:
                raise
            return exc.actual
        return self.first_id

    async def _exists(self, session_id: str) -> bool:
        try:  # the stream's first step finds the session, or raises
            async with contextlib.aclosing(self.store.iter_entries(session_id)) as entries:
                async for _ in entries:
                    break
        except SessionNotFoundError:
            return False
        return True

    def _known_end(self, session_id: str) -> Sequence[SessionEntry] | None:
        """The last entries known to end ``session_id``; None if not known."""
        end = self._end
        return end[1] if end is not None and end[0] == session_id else None

    def _ended(
        self, session_id: str, before: Sequence[SessionEntry], entries: Sequence[SessionEntry]
    ) -> None:
        """``session_id`` ends with ``entries``, appended just after ``before``."""
        end = (*before, *entries)[-_END:]
        self._end = (session_id, end) if end else None

    # ------------------------------------------------------------ moving on

    async def _move(
        self, head: str | None, current: str, read: list[SessionEntry], to: str
    ) -> bool:
        """Move the head to ``to`` if it still stands at ``head`` and its
        session ``current`` still ends as ``read``; False when either changed."""
        try:
            if head is None:  # the first session, before any head: no append yet
                await self.store.set_head(self.name, to, expect=None)
            else:
                end = read[-1].id if read else ""
                await self.store.set_head(self.name, to, expect=head, expect_last=end)
        except SessionConflictError:
            return False  # the unused branch stays, named by nothing
        self._seen, self._end = to, None
        return True

    async def _branch(self, current: str, kept: list[SessionEntry]) -> str:
        """A new session holding ``kept`` (a prefix of ``current``), parent ``current``."""
        if not kept:
            return await self.store.create(SessionMeta.new(parent_session=current))
        at = kept[-1].id
        if all(entry.id != at for entry in kept[:-1]):
            return (await self.store.fork(current, at=at)).id
        # A fork ends at the first entry of that id: an imported session
        # can repeat ids, so the prefix is copied instead.
        copy = await self.store.create(SessionMeta.new(parent_session=current))
        await self.store.append_many(copy, kept)
        return copy


def _is_message(entry: SessionEntry) -> bool:
    return isinstance(entry, MessageEntry)
