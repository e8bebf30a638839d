"""Where one ADK (app, user) lives in a store, and the reads and shared-state
writes `sessionstore.integrations.adk` makes there: `Place`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sessionstore import (
    EntrySlice,
    MessageEntry,
    SessionConflictError,
    SessionEntry,
    SessionJournal,
    SessionStore,
)
from sessionstore.integrations.adk_events import (
    Names,
    Tail,
    app_journal,
    event_of,
    event_time,
    state_line,
    state_of,
    updated_of,
)
from sessionstore.integrations.kept import KEPT, KEPT_BYTES, Latest, weight

if TYPE_CHECKING:
    from google.adk.events.event import Event

__all__ = ["ATTEMPTS", "CHUNK", "KeptEvents", "Place", "app_users", "merged"]

ATTEMPTS = 64
"""Writes that lost a race, each read and tried again, before giving up."""

CHUNK = 64
"""Entries read back at a time, looking for a time, a state or an event."""

_DURABILITY: Literal["store"] = (
    "store"  # shared state needs no more than the sessions it belongs to
)


@dataclass(frozen=True)
class Place:
    """One ADK session's names, on the store views that hold it.

    Attributes:
        names: its names.
        view: the owner's view of the store (`ScopedStore`): its sessions,
            heads and the user's journal.
        root: the whole store, for the app's journal, which all its users share.
    """

    names: Names
    view: SessionStore
    root: SessionStore

    async def current(self) -> str:
        """The store session the ADK session continues in now."""
        return await self.view.head(self.names.base) or self.names.base

    async def events_read(
        self, session: str, recent: int | None, after: float | None
    ) -> tuple[list[SessionEntry], int, int]:
        """The entries holding the events asked for (maybe a few before),
        where they start, and the session's length (0 when nothing is read)."""
        if recent == 0:
            return [], 0, 0
        if recent is None and after is None:
            read = await self.view.load_slice(session)
            return read.entries, read.start, read.length
        # From the end back, a chunk at a time, until enough events or one before ``after``.
        read = await self.view.load_slice(session, -(recent or CHUNK))
        entries, start = read.entries, read.start
        while start > 0 and not _enough(entries, recent, after):
            more = await self.view.load_slice(session, max(0, start - CHUNK), start)
            entries, start = more.entries + entries, more.start
        return entries, start, read.length

    async def tail(
        self,
        session: str,
        entries: list[SessionEntry] | None = None,
        start: int = 0,
        length: int = 0,
    ) -> Tail:
        """Where a session ends: its last entry, the entry holding its state
        and the time of its last event, from ``entries`` when they end it
        (read back in chunks while its last entries are not the adapter's)."""
        if not entries or start + len(entries) != length:
            read = await self.view.load_slice(session, -1)
            entries, start, length = read.entries, read.start, read.length
        last = entries[-1].id if entries else ""
        state_at, updated = -1, None
        while True:
            for offset in range(len(entries) - 1, -1, -1):
                found = state_of(entries[offset], start + offset)
                if found is not None and state_at < 0:
                    state_at = start + offset if isinstance(found, dict) else found
                if updated is None:
                    updated = updated_of(entries[offset : offset + 1])
                if state_at >= 0 and updated is not None:
                    return Tail(session, last, length, state_at, updated)
            if start == 0:
                return Tail(session, last, length, state_at, updated or 0.0)
            read = await self.view.load_slice(session, max(0, start - CHUNK), start)
            entries, start = read.entries, read.start

    async def tail_and_state(
        self,
        session: str,
        entries: list[SessionEntry] | None = None,
        start: int = 0,
        length: int = 0,
    ) -> tuple[Tail, dict[str, Any]]:
        """`tail`, and the session's own state: read from the entries in hand
        when one of them holds it (the last often does), else read."""
        if not entries or start + len(entries) != length:
            read = await self.view.load_slice(session, -1)
            entries, start, length = read.entries, read.start, read.length
        tail = await self.tail(session, entries, start, length)
        if start <= tail.state_at < start + len(entries):
            found = state_of(entries[tail.state_at - start], tail.state_at)
            if isinstance(found, dict):
                return tail, dict(found)
        return tail, await self.state_at(tail)

    async def state_at(self, tail: Tail) -> dict[str, Any]:
        """The session's own state, held by the entry at ``tail.state_at``."""
        if tail.state_at < 0:
            return {}
        read = await self.view.load_slice(tail.session, tail.state_at, tail.state_at + 1)
        found = state_of(read.entries[0], tail.state_at) if read.entries else None
        return dict(found) if isinstance(found, dict) else {}

    # ------------------------------------------------------------ shared state

    def _journal(self, app: bool) -> SessionJournal:
        if app:
            return self.root.journal(app_journal(self.names.app_name), durability=_DURABILITY)
        return self.view.journal(self.names.user_journal, durability=_DURABILITY)

    async def merged(self, own: dict[str, Any]) -> dict[str, Any]:
        """The state ADK sees: app and user state, prefixed, over the session's own."""
        return merged((await self.scope(app=True))[1], (await self.scope(app=False))[1], own)

    async def scope(self, *, app: bool) -> tuple[int, dict[str, Any]]:
        """The newest revision of the app's (else the user's) state; 0 and
        empty when none was written."""
        newest = await self._journal(app).scan("v/", limit=1)
        if not newest:
            return 0, {}
        key, lines = newest[0]
        state = json.loads(lines[-1]).get("state")
        return int(key.removeprefix("v/")), dict(state) if isinstance(state, dict) else {}

    async def share(
        self, app: dict[str, Any], user: dict[str, Any], *, new_user: bool = False
    ) -> None:
        """Merge deltas into the app's and the user's state; with ``new_user``,
        list the user among the app's (once)."""
        if new_user:
            key = f"u/{self.names.user_id}"
            await self._journal(True).append_keyed_unless([key], _taken, state_line(key, {}))
        for is_app, delta in ((True, app), (False, user)):
            if delta:
                await self._merge_into(is_app, delta)

    async def _merge_into(self, app: bool, delta: dict[str, Any]) -> None:
        """Write the next revision of a scope's state; when another writer took
        that revision, merge into theirs."""
        journal = self._journal(app)
        for _ in range(ATTEMPTS):
            revision, state = await self.scope(app=app)
            key = f"v/{revision + 1:012d}"
            if (
                await journal.append_keyed_unless(
                    [key], _taken, state_line(key, {**state, **delta})
                )
                is None
            ):
                return
            await asyncio.sleep(0)
        raise SessionConflictError(self.names.base, f"{ATTEMPTS} state merges lost their race")


@dataclass(frozen=True)
class _Events:
    """A store session's entries holding events, from its first entry to ``stop``."""

    stop: int
    last_id: str  # the id of entry ``stop - 1``
    entries: tuple[SessionEntry, ...]
    weight: int


class _Slot:
    """Where one session's kept events are, replaced whole."""

    kept: _Events | None = None

    @property
    def weight(self) -> int:
        kept = self.kept
        return 0 if kept is None else kept.weight


class KeptEvents:
    """The events of the store sessions a service read whole, kept between
    reads: the next whole read asks the store only for the entries appended
    since (after re-reading the last one kept, to check its id), for the last
    `SESSIONS` sessions read, each of at most `KEPT` entries and `KEPT_BYTES`
    (a longer one is read whole each time), about 100 MiB in all
    (`sessionstore.integrations.kept`). What is kept is the entries, as
    read (frozen); each read builds its events from them anew, so no event
    handed out is another's, and none costs a read of the store twice."""

    SESSIONS = 256
    """Sessions whose events are kept at most, the latest read."""

    def __init__(self) -> None:
        self._latest = self._new()

    def _new(self) -> Latest[_Slot]:
        return Latest(lambda name: _Slot(), most=self.SESSIONS, weigh=lambda slot: slot.weight)

    def forget(self) -> None:
        """Drop every event kept: the next reads read whole sessions."""
        self._latest = self._new()

    async def read(self, view: SessionStore, session: str) -> tuple[list[Event], EntrySlice]:
        """A store session's events, and the read that ended them (its last
        entries, from the last one kept, when some were kept).

        Raises:
            SessionNotFoundError, CorruptSessionError: as `SessionStore.load_slice`.
        """
        slot = self._latest.get(session)
        kept = slot.kept
        if kept is not None:
            read = await view.load_slice(session, kept.stop - 1)
            first = read.entries[0] if read.entries else None
            if read.start == kept.stop - 1 and first is not None and first.id == kept.last_id:
                return self._kept(slot, read, read.entries[1:], kept.entries, kept.weight)
        read = await view.load_slice(session)
        return self._kept(slot, read, read.entries, (), 0)

    @staticmethod
    def _kept(
        slot: _Slot,
        read: EntrySlice,
        new: list[SessionEntry],
        entries: tuple[SessionEntry, ...],
        heavy: int,
    ) -> tuple[list[Event], EntrySlice]:
        """The events of ``entries`` and ``new``, the entries kept in ``slot``
        (when they fit)."""
        held = [entry for entry in new if isinstance(entry, MessageEntry)]
        entries += tuple(held)
        heavy += sum(weight(entry.message) for entry in held)
        fits = read.entries and heavy <= KEPT_BYTES and len(entries) <= KEPT
        slot.kept = _Events(read.stop, read.entries[-1].id, entries, heavy) if fits else None
        return [event for event in map(event_of, entries) if event is not None], read


async def app_users(root: SessionStore, app_name: str) -> list[str]:
    """The users who ever had a session in the app."""
    journal = root.journal(app_journal(app_name), durability=_DURABILITY)
    return [key.removeprefix("u/") for key, _ in await journal.scan("u/")]


def merged(app: dict[str, Any], user: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """A session's own state with the app's and the user's, prefixed, over it."""
    state = dict(own)
    state.update({f"app:{key}": value for key, value in app.items()})
    state.update({f"user:{key}": value for key, value in user.items()})
    return state


def _taken(found: dict[str, list[bytes]]) -> bool | None:
    return True if found else None


def _enough(entries: list[SessionEntry], recent: int | None, after: float | None) -> bool:
    """Whether ``entries`` hold ``recent`` events (when given), else one older than ``after``."""
    times = [stamp for stamp in map(event_time, entries) if stamp is not None]
    if recent is not None:
        return len(times) >= recent
    return after is not None and any(stamp < after for stamp in times)
