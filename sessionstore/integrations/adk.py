"""A Google ADK session service over any sessionstore store: `StoreSessionService`.

``Runner(agent=agent, app_name="shop", session_service=StoreSessionService(store))``
keeps every ADK session in ``store``, where ``sessionstore show``, search,
export and the HTML transcript read it. docs/integrations.md (ADK) has the
how-to; this is the layout and why.

**Sessions.** An ADK session is named by (app, user, session id); a store
session by one id. `Names` maps the three to ``adk-<scope>-<session id>``
(``scope`` a 128-bit digest of the app and user, so two users' ``"s1"``
never meet; an id the session-id rule refuses is digested too). The header's
``owner`` is ``adk:["<app>","<user>"]`` (JSON, so no two pairs share it), the
filter every listing and search takes, and its ``metadata["adk"]`` names the
app, user and session id. Tenancy rests on the id: a call for (app, user)
computes ids only under that scope, so it cannot reach another's session.

**Events.** Each event is one entry: a `Message` whose role and content are
what views read (text, ``tool_use`` and ``tool_result`` blocks:
`adk_events.message_of`), holding the whole event as ADK's JSON form in its
``adk`` field, given back exactly (`adk_events.event_of`). The first entry
records the creation time and initial state.

**State.** Session state lives in the session's own entries, in the same
write as its event: an entry whose event changes it holds the session's
whole state after it (``adk_state``, as ADK's database service rewrites its
state row); any other entry holds the position of the one that does
(``adk_state_at``). So reading the state costs one or two entries, never the
session. ``app:`` and ``user:`` state are shared by many sessions, so no
session's entry can hold them: each scope is a journal (``adk-app-<digest>``,
``adk-user-<digest>``) of keyed lines ``v/<revision>``, each the scope's
whole state, the newest read by one ``scan`` and the next written by
``append_keyed_unless`` (of two writers, one wins and the other merges
again). They are written right after the event: a crash between keeps the
event (its ``state_delta`` included) and loses that shared update. ``temp:``
keys are never stored. The app's journal also lists its users (keys
``u/<user>``), so a listing of an app's sessions reads only its users'.

**Concurrency.** Every append is conditional (``expect_last`` and
``expect_head``) on where the session ended when last read, which the ADK
``Session`` carries; when another run appended meanwhile, the service reads
the new end and appends after it, merging the state again. Two runs on one
session never lose an event or a state change, and never get a stale-session
error.

**Rewind.** ``Runner.rewind_async`` appends an event rewinding to before an
invocation. The service forks the store session just before that
invocation's first event (`BranchingStore.fork`), appends the rewind event
to the fork and moves the session's head to it: the session continues
there, and the rewound branch stays a session of its own (listed as the
fork's ``parent_session``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import aclosing, suppress
from typing import Any

try:
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import (
        SessionNotFoundError as ADKNotFoundError,
    )
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.adk needs google-adk ({exc}): pip install 'sessionstore[adk]'"
    ) from exc

from sessionstore import (
    DuplicateSessionError,
    SessionConflictError,
    SessionEntry,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
)
from sessionstore.integrations.adk_events import (
    ADK_FIELD,
    Names,
    Tail,
    app_journal,
    created_entry,
    event_entry,
    event_of,
    json_safe,
    split_state,
    state_line,
    state_of,
    updated_of,
)
from sessionstore.wire import encode

__all__ = ["ADKSessionNotFoundError", "SessionExistsError", "StoreSessionService"]

_ATTEMPTS = 64  # appends that lost a race, before giving up
_CHUNK = 64  # entries read back at a time, looking for a time or a state
_PAGE = 200  # summaries read per page


class SessionExistsError(DuplicateSessionError, AlreadyExistsError):
    """`create_session` was given the id of a session that exists: ADK's
    ``AlreadyExistsError``, as its services raise, and a `DuplicateSessionError`."""

    def __init__(self, session_id: str) -> None:
        DuplicateSessionError.__init__(self, session_id)
        self.message = str(self)


class ADKSessionNotFoundError(SessionNotFoundError, ADKNotFoundError):
    """`append_event` on a session that does not exist (or was deleted): ADK's
    ``SessionNotFoundError``, as its services raise, and the store's."""


class StoreSessionService(BaseSessionService):
    """An ADK session service keeping its sessions in a sessionstore store.

    Args:
        store: any open store with every capability (`SessionStore`); the
            caller keeps it open and closes it. Many services, in many
            processes, may share one store.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"StoreSessionService({self.store!r})"

    # ------------------------------------------------------------ sessions

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session, its header and first entry in one write.

        Raises:
            SessionExistsError: ``session_id`` names a session of this app
                and user (ADK's ``AlreadyExistsError``).
        """
        names = Names.of(app_name, user_id, session_id or str(uuid.uuid4()))
        app, user, own = split_state(json_safe(state or {}))
        created = time.time()
        meta = _header(names, names.base, 0)
        first = created_entry(names, created, own)

        async def lines() -> Any:
            yield encode(first)

        try:
            await self.store.import_session(encode(meta), lines())
        except DuplicateSessionError:
            raise SessionExistsError(names.session_id) from None
        await self.store.set_head(names.base, names.base)
        await self._shared(names, app, user, new_user=True)
        session = Session(
            id=names.session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(names, own),
            last_update_time=created,
        )
        session._storage_update_marker = Tail(names.base, first.id, 1, 0, created).marker()
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """A session with its events, or the last ones `GetSessionConfig`
        asks for, read at the cost of those; None when there is none."""
        names = Names.of(app_name, user_id, session_id)
        current = await self._current(names)
        try:
            entries, start, length = await self._events_read(current, config)
            tail, own = await self._tail_and_state(current, entries, start, length)
        except SessionNotFoundError:
            return None
        events = [event for event in map(event_of, entries) if event is not None]
        if config is not None and config.num_recent_events is not None:
            events = events[-config.num_recent_events :] if config.num_recent_events else []
        if config is not None and config.after_timestamp is not None:
            events = _after(events, config.after_timestamp)
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(names, own),
            events=events,
            last_update_time=tail.updated,
        )
        session._storage_update_marker = tail.marker()
        return session

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The sessions of a user in an app (of every user in the app when
        ``user_id`` is None), without events, the least recently updated
        first. Reads each user's page of summaries, then each session's
        last entry or two (its state and time); every user's when None."""
        if user_id is None:
            journal = self.store.journal(app_journal(app_name), durability="store")
            users = [key.removeprefix("u/") for key, _ in await journal.scan("u/")]
        else:
            users = [user_id]
        sessions: list[Session] = []
        for user in users:
            sessions += await self._user_sessions(app_name, user)
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Erase a session, every branch a rewind made included (each an
        `Erasure` recorded, reason ``ADK delete_session``); none is fine."""
        names = Names.of(app_name, user_id, session_id)
        branches = [move.session_id for move in await self.store.head_history(names.base)]
        for branch in dict.fromkeys(reversed([names.base, *branches])):
            with suppress(SessionNotFoundError):  # newest first: SQL forks share entries
                await self.store.erase(branch, reason="ADK delete_session")

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without ``user:``."""
        return (await self._scope(Names.of(app_name, user_id, "-").user_journal))[1]

    # ------------------------------------------------------------ events

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store an event with its state changes; a partial event is not stored.

        Raises:
            ADKSessionNotFoundError: the session does not exist.
            SessionConflictError: other runs kept appending between each
                read and write (64 times); nothing was stored.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        payload = event.model_dump(mode="json", exclude_defaults=True)
        app, user, own = split_state(payload.get("actions", {}).get("state_delta", {}))
        names = Names.of(session.app_name, session.user_id, session.id)
        tail = Tail.from_marker(session._storage_update_marker)
        try:
            if event.actions.rewind_before_invocation_id:
                tail = await self._rewind(names, event.actions.rewind_before_invocation_id)
            tail = await self._append(names, tail, payload, event, own)
        except SessionNotFoundError:
            raise ADKSessionNotFoundError(names.base) from None
        await self._shared(names, app, user)
        session._storage_update_marker = tail.marker()
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    async def _append(
        self,
        names: Names,
        tail: Tail | None,
        payload: dict[str, Any],
        event: Event,
        own: dict[str, Any],
    ) -> Tail:
        """Append the event's entry after ``tail`` (read again while another run
        appended meanwhile); the tail after it."""
        for _ in range(_ATTEMPTS):
            if tail is None:
                tail = await self._tail(await self._current(names))
            state: dict[str, Any] | int = tail.state_at
            if own or tail.state_at < 0:
                state = {**(await self._state_at(tail)), **own}
            entry = event_entry(payload, event, state)
            try:
                await self.store.append(
                    tail.session, entry, expect_last=tail.last, expect_head=names.base
                )
            except SessionConflictError as exc:
                if exc.what == "head" and exc.actual is None:  # creation cut before its head
                    await self.store.set_head(names.base, names.base, expect=None)
                tail = None
                continue
            at = tail.length if isinstance(state, dict) else tail.state_at
            return Tail(tail.session, entry.id, tail.length + 1, at, event.timestamp)
        raise SessionConflictError(names.base, f"{_ATTEMPTS} appends lost their race")

    async def _rewind(self, names: Names, invocation: str) -> Tail:
        """Fork the session just before the invocation's first event and move
        its head there; the fork's tail. Without such an event, the current tail."""
        current = await self._current(names)
        before: SessionEntry | None = None
        async with aclosing(self.store.iter_entries(current)) as entries:
            async for entry in entries:
                event = event_of(entry)
                if event is not None and event.invocation_id == invocation and before is not None:
                    break
                before = entry
            else:
                return await self._tail(current)
        history = await self.store.head_history(names.base)
        number = len(history)
        while True:
            meta = _header(names, names.branch(number), number, parent=current)
            try:
                await self.store.fork(current, at=before.id, meta=meta)
                break
            except DuplicateSessionError:
                number += 1
        await self.store.set_head(names.base, meta.id, expect=current)
        return await self._tail(meta.id)

    # ------------------------------------------------------------ reads

    async def _current(self, names: Names) -> str:
        """The store session an ADK session continues in now."""
        return await self.store.head(names.base) or names.base

    async def _events_read(
        self, session: str, config: GetSessionConfig | None
    ) -> tuple[list[SessionEntry], int, int]:
        """The entries holding the events asked for (and maybe a few before),
        where they start, and the session's length (0 when nothing is read)."""
        recent = None if config is None else config.num_recent_events
        after = None if config is None else config.after_timestamp
        if recent == 0:
            return [], 0, 0
        if recent is None and after is None:
            read = await self.store.load_slice(session)
            return read.entries, read.start, read.length
        # From the end back, a chunk at a time, until enough events, or one before ``after``.
        read = await self.store.load_slice(session, -(recent or _CHUNK))
        entries, start = read.entries, read.start
        while start > 0 and not _enough(entries, recent, after):
            more = await self.store.load_slice(session, max(0, start - _CHUNK), start)
            entries, start = more.entries + entries, more.start
        return entries, start, read.length

    async def _tail_and_state(
        self, session: str, entries: list[SessionEntry], start: int, length: int
    ) -> tuple[Tail, dict[str, Any]]:
        """The session's tail and own state, from the entries read when they
        end it, else from its last entries."""
        if not entries or start + len(entries) != length:
            tail = await self._tail(session)
        else:
            tail = await self._tail(session, entries, start, length)
        return tail, await self._state_at(tail)

    async def _tail(
        self,
        session: str,
        entries: list[SessionEntry] | None = None,
        start: int = 0,
        length: int = 0,
    ) -> Tail:
        """Where a session ends: its last entry, the entry holding its state
        and the time of its last event (read back in chunks while its last
        entries are not the adapter's)."""
        if entries is None:
            read = await self.store.load_slice(session, -1)
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
            read = await self.store.load_slice(session, max(0, start - _CHUNK), start)
            entries, start = read.entries, read.start

    async def _state_at(self, tail: Tail) -> dict[str, Any]:
        """The session's own state the entry at ``tail.state_at`` holds."""
        if tail.state_at < 0:
            return {}
        read = await self.store.load_slice(tail.session, tail.state_at, tail.state_at + 1)
        found = state_of(read.entries[0], tail.state_at) if read.entries else None
        return dict(found) if isinstance(found, dict) else {}

    async def _user_sessions(self, app_name: str, user_id: str) -> list[Session]:
        """Every live session of a user in an app, without events."""
        names = Names.of(app_name, user_id, "-")
        live: dict[str, tuple[int, str]] = {}  # ADK id -> (branch, store id)
        after: str | None = None
        while True:
            page = await self.store.summaries(owner=names.owner, limit=_PAGE, after=after)
            for summary in page:
                kept = summary.meta.metadata.get(ADK_FIELD)
                if not isinstance(kept, dict) or kept.get("app_name") != app_name:
                    continue
                sid, branch = kept.get("session_id"), kept.get("branch")
                if not isinstance(sid, str) or not isinstance(branch, int):
                    continue
                if sid not in live or live[sid][0] < branch:
                    live[sid] = (branch, summary.id)
            if len(page) < _PAGE:
                break
            after = page[-1].cursor
        app_state = await self._scope(app_journal(app_name))
        user_state = await self._scope(names.user_journal)
        sessions = []
        for sid, (_, store_id) in live.items():
            try:
                tail = await self._tail(store_id)
            except SessionNotFoundError:  # erased meanwhile
                continue
            own = await self._state_at(tail)
            sessions.append(
                Session(
                    id=sid,
                    app_name=app_name,
                    user_id=user_id,
                    state=_merge(app_state[1], user_state[1], own),
                    last_update_time=tail.updated,
                )
            )
        return sessions

    # ------------------------------------------------------------ shared state

    async def _merged(self, names: Names, own: dict[str, Any]) -> dict[str, Any]:
        """The state ADK sees: app and user state, prefixed, over the session's own."""
        app = await self._scope(app_journal(names.app_name))
        user = await self._scope(names.user_journal)
        return _merge(app[1], user[1], own)

    async def _scope(self, journal_name: str) -> tuple[int, dict[str, Any]]:
        """The newest revision of a shared scope's state (0 and empty: none)."""
        journal = self.store.journal(journal_name, durability="store")
        newest = await journal.scan("v/", limit=1)
        if not newest:
            return 0, {}
        key, lines = newest[0]
        state = json.loads(lines[-1]).get("state")
        return int(key.removeprefix("v/")), dict(state) if isinstance(state, dict) else {}

    async def _shared(
        self,
        names: Names,
        app: dict[str, Any],
        user: dict[str, Any],
        *,
        new_user: bool = False,
    ) -> None:
        """Merge deltas into the app's and the user's state; with ``new_user``,
        list the user among the app's."""
        if new_user:
            journal = self.store.journal(app_journal(names.app_name), durability="store")
            key = f"u/{names.user_id}"
            await journal.append_keyed_unless([key], _taken, state_line(key, {}))
        for journal_name, delta in ((app_journal(names.app_name), app), (names.user_journal, user)):
            if delta:
                await self._merge_into(journal_name, delta)

    async def _merge_into(self, journal_name: str, delta: dict[str, Any]) -> None:
        journal = self.store.journal(journal_name, durability="store")
        for _ in range(_ATTEMPTS):
            revision, state = await self._scope(journal_name)
            key = f"v/{revision + 1:012d}"
            line = state_line(key, {**state, **delta})
            if await journal.append_keyed_unless([key], _taken, line) is None:
                return
            await asyncio.sleep(0)
        raise SessionConflictError(journal_name, f"{_ATTEMPTS} state merges lost their race")


def _header(names: Names, store_id: str, branch: int, parent: str | None = None) -> SessionMeta:
    """The header of a store session of an ADK session, made now."""
    made = SessionMeta.new(
        parent,
        title=names.session_id,
        owner=names.owner,
        tags=("adk",),
        metadata=names.metadata(branch),
    )
    return made.model_copy(update={"id": store_id})


def _taken(found: dict[str, list[bytes]]) -> bool | None:
    return True if found else None


def _merge(app: dict[str, Any], user: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    merged = dict(own)
    merged.update({f"app:{key}": value for key, value in app.items()})
    merged.update({f"user:{key}": value for key, value in user.items()})
    return merged


def _enough(entries: list[SessionEntry], recent: int | None, after: float | None) -> bool:
    """Whether ``entries`` hold ``recent`` events (when given), else one older than ``after``."""
    events = [event for event in map(event_of, entries) if event is not None]
    if recent is not None:
        return len(events) >= recent
    return after is not None and any(event.timestamp < after for event in events)


def _after(events: list[Event], after: float) -> list[Event]:
    """ADK's ``after_timestamp``: the events after the last one older than it."""
    for at in range(len(events) - 1, -1, -1):
        if events[at].timestamp < after:
            return events[at + 1 :]
    return events
