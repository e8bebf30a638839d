"""A Google ADK session service over any sessionstore store: `StoreSessionService`.

``Runner(agent=agent, app_name="shop", session_service=StoreSessionService(store))``
keeps every ADK session in ``store``, where ``sessionstore show``, search,
export and the HTML transcript read it. docs/integrations.md (Google ADK)
has the how-to and the layout: names and owners (`adk_events.Names`, each
call on its owner's `ScopedStore`), events as entries (`adk_events`), state
scopes, rewind as a fork, conditional appends (`adk_events.Tail`), reads
kept between calls (`adk_reads.KeptEvents`) and what each call costs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing, suppress
from dataclasses import replace
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
    ConfigurationError,
    DuplicateSessionError,
    InvalidCursorError,
    InvalidRecordError,
    ScopedStore,
    SessionConflictError,
    SessionEntry,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    SessionSummary,
)
from sessionstore.integrations.adk_events import (
    ADK_FIELD,
    Names,
    Tail,
    created_entry,
    event_entry,
    event_of,
    json_safe,
    split_state,
)
from sessionstore.integrations.adk_reads import ATTEMPTS, KeptEvents, Place, app_users, merged
from sessionstore.wire import encode

__all__ = ["ADKSessionNotFoundError", "SessionExistsError", "SessionPage", "StoreSessionService"]

_PAGE = 200  # summaries read per page
_READS = 16  # sessions read at once by a listing


class SessionExistsError(DuplicateSessionError, AlreadyExistsError):
    """`create_session` was given the id of a session that exists: ADK's
    ``AlreadyExistsError``, as its services raise, and a `DuplicateSessionError`."""

    def __init__(self, session_id: str) -> None:
        DuplicateSessionError.__init__(self, session_id)
        self.message = str(self)


class ADKSessionNotFoundError(SessionNotFoundError, ADKNotFoundError):
    """`append_event` on a session that does not exist (or was deleted): ADK's
    ``SessionNotFoundError``, as its services raise, and the store's."""


class SessionPage(ListSessionsResponse):
    """What `StoreSessionService.list_sessions` answers: ADK's
    ``ListSessionsResponse`` (2.13's has no paging field), and the token of
    the next page.

    Attributes:
        next_page_token: pass it as ``page_token`` for the page after this
            one; None on the last page and on a listing asked without
            ``page_size``.
    """

    next_page_token: str | None = None


class StoreSessionService(BaseSessionService):
    """An ADK session service keeping its sessions in a sessionstore store.

    Args:
        store: any open store with every capability (`SessionStore`), the
            whole store (not a `ScopedStore`: the service makes one per app
            and user); the caller keeps it open and closes it. Many
            services, in many processes, may share one store.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._events = KeptEvents()

    def forget_events(self) -> None:
        """Drop the events kept of the sessions read whole (`KeptEvents`):
        the next `get_session` reads each session whole again."""
        self._events.forget()

    def __repr__(self) -> str:
        return f"StoreSessionService({self.store!r})"

    def _place(self, app_name: str, user_id: str, session_id: str = "-") -> Place:
        names = Names.of(app_name, user_id, session_id)
        return Place(names, ScopedStore(self.store, names.owner), self.store)

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

        ``session_id`` is stripped of surrounding whitespace, as by every
        call naming a session (`Names.of`); none, or a blank one, gets a new
        UUID, as ADK's ``InMemorySessionService`` gives.

        Raises:
            SessionExistsError: ``session_id`` names a session of this app
                and user (ADK's ``AlreadyExistsError``).
        """
        place = self._place(app_name, user_id, (session_id or "").strip() or str(uuid.uuid4()))
        names = place.names
        app, user, own = split_state(json_safe(state or {}))
        created = time.time()
        first = created_entry(names, created, own)

        async def lines() -> AsyncIterator[str]:
            yield encode(first)

        try:
            await place.view.import_session(encode(_header(names, names.base, 0)), lines())
        except DuplicateSessionError:
            raise SessionExistsError(names.session_id) from None
        await place.view.set_head(names.base, names.base)
        await place.share(app, user, new_user=True)
        session = Session(
            id=names.session_id,
            app_name=app_name,
            user_id=user_id,
            state=await place.merged(own),
            last_update_time=created,
        )
        session._storage_update_marker = Tail(names.base, first.id, 1, 0, created, own).marker()
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
        place = self._place(app_name, user_id, session_id)
        recent = None if config is None else config.num_recent_events
        after = None if config is None else config.after_timestamp
        try:
            current = await place.current()
            if recent is None and after is None:  # the whole session: what is new since
                events, read = await self._events.read(place.view, current)
                entries, start, length = read.entries, read.start, read.length
            else:
                entries, start, length = await place.events_read(current, recent, after)
                events = [event for event in map(event_of, entries) if event is not None]
            tail, own = await place.tail_and_state(current, entries, start, length)
        except SessionNotFoundError:
            return None
        if recent is not None:
            events = events[-recent:] if recent else []
        if after is not None:
            events = _after(events, after)
        session = Session(
            id=place.names.session_id,
            app_name=app_name,
            user_id=user_id,
            state=await place.merged(own),
            events=events,
            last_update_time=tail.updated,
        )
        session._storage_update_marker = replace(tail, state=own).marker()
        return session

    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> SessionPage:
        """The sessions of a user in an app (of every user in the app when
        ``user_id`` is None), without events, the least recently updated
        first; with ``page_size``, a page of them, the most recently active
        first (docs/integrations.md, Listing a page: what a page holds).

        Args:
            page_size: how many store sessions a page reads at most (1 or more).
            page_token: a `SessionPage.next_page_token` of this app and user,
                with ``page_size``.

        Raises:
            ConfigurationError: ``page_size`` is not an int of 1 or more;
                ``page_token`` is not a token a page of this app and user
                gave, or comes without ``page_size``; paging without a
                ``user_id`` (page each user's sessions instead).
        """
        if page_size is None and page_token is None:
            users = await app_users(self.store, app_name) if user_id is None else [user_id]
            sessions: list[Session] = []
            for user in users:
                sessions += await self._user_sessions(self._place(app_name, user))
            sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
            return SessionPage(sessions=sessions)
        if page_size is None:
            raise ConfigurationError("list_sessions: page_token continues a page: give page_size")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ConfigurationError(
                f"list_sessions: page_size must be an int of 1 or more, not {page_size!r}"
            )
        if page_token is not None and (not isinstance(page_token, str) or not page_token):
            raise ConfigurationError(
                f"list_sessions: page_token must be a token a page gave, not {page_token!r}"
            )
        if user_id is None:
            raise ConfigurationError(
                "list_sessions: page_size pages one user's sessions: give user_id "
                "(the app's users' sessions are listed whole, without page_size)"
            )
        place = self._place(app_name, user_id)
        try:
            page = await place.view.summaries(limit=page_size, after=page_token)
        except InvalidCursorError:  # another listing's, or edited: said alike, naming none
            raise ConfigurationError(
                f"list_sessions: page_token is no token a page of app {app_name!r}, "
                f"user {user_id!r} gave: list again without it"
            ) from None
        listed = [each for each in map(_listed, page, [app_name] * len(page)) if each is not None]

        async def live(sid: str, branch: int, store_id: str) -> tuple[str, str] | None:
            """The pair, when its store session is where the ADK session
            continues now (not a branch a rewind left)."""
            base = Names.of(app_name, user_id, sid).base
            return (sid, store_id) if (await place.view.head(base) or base) == store_id else None

        picked = await asyncio.gather(*(live(*each) for each in listed))
        sessions = await self._read_listed(place, [each for each in picked if each is not None])
        sessions.sort(key=lambda s: (s.last_update_time, s.id))
        more = page[-1].cursor if len(page) == page_size else None
        return SessionPage(sessions=sessions, next_page_token=more)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Erase a session, every branch a rewind made included (each an
        `Erasure` recorded, reason ``ADK delete_session``); none is fine."""
        place = self._place(app_name, user_id, session_id)
        base = place.names.base
        branches = [move.session_id for move in await place.view.head_history(base)]
        for branch in dict.fromkeys(reversed([base, *branches])):
            with suppress(SessionNotFoundError):  # newest first: SQL forks share entries
                await place.view.erase(branch, reason="ADK delete_session")

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without ``user:``."""
        return (await self._place(app_name, user_id).scope(app=False))[1]

    async def store_session_id(self, *, app_name: str, user_id: str, session_id: str) -> str:
        """The id of the store session an ADK session continues in now (what
        ``sessionstore show`` takes): its first one, or after a rewind its fork."""
        return await self._place(app_name, user_id, session_id).current()

    # ------------------------------------------------------------ events

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store an event with its state changes; a partial event is not stored.

        Raises:
            ADKSessionNotFoundError: the session does not exist.
            InvalidRecordError: the event holds what JSON cannot carry (a
                function in its state delta...); nothing was stored.
            SessionConflictError: other runs kept appending between each
                read and write (64 times); nothing was stored.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        try:
            payload = event.model_dump(mode="json", exclude_defaults=True)
        except (TypeError, ValueError) as exc:  # pydantic's PydanticSerializationError
            raise InvalidRecordError(
                f"ADK session {session.id!r}: an event with what JSON cannot carry: {exc}"
            ) from None
        app, user, own = split_state(payload.get("actions", {}).get("state_delta", {}))
        place = self._place(session.app_name, session.user_id, session.id)
        tail = Tail.from_marker(session._storage_update_marker)
        try:
            if event.actions.rewind_before_invocation_id:
                tail = await _rewind(place, event.actions.rewind_before_invocation_id)
            tail = await _append(place, tail, payload, event, own)
        except SessionNotFoundError:
            raise ADKSessionNotFoundError(place.names.base) from None
        await place.share(app, user)
        session._storage_update_marker = tail.marker()
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    async def _user_sessions(self, place: Place) -> list[Session]:
        """Every live session of a user in an app, without events."""
        names = place.names
        live: dict[str, tuple[int, str]] = {}  # ADK id -> (branch, store id)
        after: str | None = None
        while True:
            page = await place.view.summaries(limit=_PAGE, after=after)
            for listed in page:
                found = _listed(listed, names.app_name)
                if found is None:
                    continue
                sid, branch, store_id = found
                if sid not in live or live[sid][0] < branch:
                    live[sid] = (branch, store_id)
            if len(page) < _PAGE:
                break
            after = page[-1].cursor
        return await self._read_listed(
            place, [(sid, store_id) for sid, (_, store_id) in live.items()]
        )

    async def _read_listed(self, place: Place, listed: list[tuple[str, str]]) -> list[Session]:
        """The sessions of (ADK id, store id) pairs the owner's listing gave,
        without events (one erased meanwhile left out)."""
        names = place.names
        app_state, user_state = await place.scope(app=True), await place.scope(app=False)
        # The ids came from the owner's own listing: read them on the whole
        # store, sparing the view's check of each header.
        reader = Place(names, self.store, self.store)

        async def read(sid: str, store_id: str) -> Session | None:
            try:
                tail, own = await reader.tail_and_state(store_id)
            except SessionNotFoundError:  # erased meanwhile
                return None
            return Session(
                id=sid,
                app_name=names.app_name,
                user_id=names.user_id,
                state=merged(app_state[1], user_state[1], own),
                last_update_time=tail.updated,
            )

        found: list[Session | None] = []
        for at in range(0, len(listed), _READS):  # a few reads in flight at once
            found += await asyncio.gather(*(read(*each) for each in listed[at : at + _READS]))
        return [session for session in found if session is not None]


async def _append(
    place: Place, tail: Tail | None, payload: dict[str, Any], event: Event, own: dict[str, Any]
) -> Tail:
    """Append the event's entry after ``tail`` (read again while another run
    appended meanwhile); the tail after it. An event equal to the session's
    last is not stored again (a caller retrying an append that landed)."""
    view, base = place.view, place.names.base
    # The append goes to the whole store, sparing the view's read of the
    # header: it is conditional on the owner's own head naming the session
    # (a head only the owner's view sets, on a session it checked is the
    # owner's) and on the session's last entry id (a UUID; a session without
    # one goes through the view), so it cannot land in another owner's
    # session, whatever the ``Session`` in hand says.
    scoped = view if isinstance(view, ScopedStore) else None
    for _ in range(ATTEMPTS):
        if tail is None:
            current = await place.current()
            read = await view.load_slice(current, -1)
            tail = await place.tail(current, read.entries, read.start, read.length)
            if read.entries and event_of(read.entries[-1]) == event:
                return tail
        state: dict[str, Any] | int = tail.state_at
        if own or tail.state_at < 0:
            held = await place.state_at(tail) if tail.state is None else tail.state
            state = {**held, **own}
        entry = event_entry(payload, event, state)
        try:
            if scoped is not None and tail.last:
                await place.root.append(
                    tail.session, entry, expect_last=tail.last, expect_head=scoped.prefix + base
                )
            else:
                await view.append(tail.session, entry, expect_last=tail.last, expect_head=base)
        except SessionConflictError as exc:
            if exc.what == "head" and exc.actual is None:  # creation cut before its head
                await view.set_head(base, base, expect=None)
            tail = None
            continue
        # The state is where it was, unless this entry holds it (at its position).
        at, kept = (tail.length, state) if isinstance(state, dict) else (tail.state_at, tail.state)
        return Tail(tail.session, entry.id, tail.length + 1, at, event.timestamp, kept)
    raise SessionConflictError(base, f"{ATTEMPTS} appends lost their race")


async def _rewind(place: Place, invocation: str) -> Tail:
    """Fork the session just before the invocation's first event and move its
    head there; the fork's tail. Without such an event, the current tail."""
    view, names = place.view, place.names
    current = await place.current()
    before: SessionEntry | None = None
    async with aclosing(view.iter_entries(current)) as entries:
        async for entry in entries:
            event = event_of(entry)
            if event is not None and event.invocation_id == invocation and before is not None:
                break
            before = entry
        else:
            return await place.tail(current)
    number = len(await view.head_history(names.base))
    while True:
        meta = _header(names, names.branch(number), number, parent=current)
        try:
            await view.fork(current, at=before.id, meta=meta)
            break
        except DuplicateSessionError:
            number += 1
    await view.set_head(names.base, meta.id, expect=current)
    return await place.tail(meta.id)


def _listed(summary: SessionSummary, app_name: str) -> tuple[str, int, str] | None:
    """The ADK id, branch and store id of a summary of the app's session;
    None for another store session."""
    kept = summary.meta.metadata.get(ADK_FIELD)
    if not isinstance(kept, dict) or kept.get("app_name") != app_name:
        return None
    sid, branch = kept.get("session_id"), kept.get("branch")
    if not isinstance(sid, str) or isinstance(branch, bool) or not isinstance(branch, int):
        return None
    return sid, branch, summary.id


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


def _after(events: list[Event], after: float) -> list[Event]:
    """ADK's ``after_timestamp``: the events after the last one older than it."""
    for at in range(len(events) - 1, -1, -1):
        if events[at].timestamp < after:
            return events[at + 1 :]
    return events
