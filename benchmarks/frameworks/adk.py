"""The ADK part of the benchmark ("through ADK"): `StoreSessionService`
against Google ADK's own session services, through ADK's own calls
(``BaseSessionService``), side by side in one run.

The sides, each timed round by round in turn:

- `StoreSessionService` on a SQLite store (`SqlStore`, a file);
- ADK's ``DatabaseSessionService('sqlite+aiosqlite:///<file>')``, on WAL
  with synchronous=NORMAL, as ours runs (ADK leaves SQLite's defaults);
- `StoreSessionService` on a `MemoryStore` against ADK's
  ``InMemorySessionService``, for reference (in memory, not durable);
- the floor, no store: the events kept as JSON strings in a list (encoded
  on append, decoded on read, as any service that keeps them outside the
  caller's objects must) and the session's state in a dict.

An event is what ADK's runner appends for one message: a real ``Event``
with ``Content`` of one text part (the benchmark's texts,
benchmarks/messages.py, some 260 bytes; the event is some 590 bytes as
JSON) and ``EventActions(state_delta=...)`` setting two session keys
(the turn, the speaker), users and the model in turn. Each side is filled
through its own calls (``create_session``, ``append_event``); the SQLite
databases are filled once per process, in the directory the runs share,
and copied.

Rows, at 100, 1,000 and 3,000 events of one session (100 and 300 with
--quick):

- ``append_event`` on the session object a runner holds (from
  ``get_session()``), after one append before (a runner's session has
  written already); each round on a new copy, so the session grows by at
  most a tenth;
- ``get_session(config=GetSessionConfig(num_recent_events=20))``, what a
  runner with a window reads;
- ``get_session()``, every event;
- at the longest only, a new process's first ``get_session()`` (SQLite
  sides): the store and the service opened on a new copy, then every event
  read, so that no cache of ours and no first-call work of either side
  hides in the steady state of the row before.

And ``list_sessions`` of one user's sessions, at 100, 1,000 and 10,000
sessions (100 and 300 with --quick): ADK 2.13's ``list_sessions`` takes
no page (its signature is ``app_name``, ``user_id``), and neither of ADK's
services pages, so theirs lists every session; ours reads one page of
`PAGE` when it offers paging (the row's name says which).

The SQLite sides and the floor are measured together, then the sides in
memory (`GROUPS`). A figure is the mean of calls in a row for the round's
budget of time (0.2 s, and 1 s for a whole session or a listing; 30 ms
with --quick), the row the median of the rounds (3; 1 with --quick).
Then the longest session against the shortest (flat is 1.00x), and the
floor against ADK's own service: the least any store could reach (the
floor's ``list_sessions`` decodes a page when ours pages, else every
session).

    .venv/bin/python benchmarks/run.py --only adk [--quick] [--runs 1]
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from messages import text
from results import Table, aper_call_within

from sessionstore import MemoryStore, SqlStore

from .base import READS, Templates

if TYPE_CHECKING:
    from google.adk.events import Event
    from google.adk.sessions import BaseSessionService, Session
    from google.adk.sessions.base_session_service import ListSessionsResponse

APP, USER, CHAT = "bench", "user", "chat"
"""The app, the user and the session of the events, on every side."""
WINDOW = 20
"""Events of ``get_session(num_recent_events=...)``."""
PAGE = 20
"""Sessions of a page of ``list_sessions``."""
PAGING = ("page_size", "limit")
"""The names a paging ``list_sessions`` of ours may take its page's size by."""


@dataclass(frozen=True)
class Plan:
    """The sizes of a run, its rounds and the seconds of calls a figure gets."""

    events: tuple[int, ...]
    sessions: tuple[int, ...]
    rounds: int
    budget: float
    read_budget: float  # a whole session or a whole listing: a call can take a third of a second

    @classmethod
    def of(cls, quick: bool) -> Plan:
        if quick:
            return cls((100, 300), (100, 300), rounds=1, budget=0.03, read_budget=0.03)
        return cls((100, 1_000, 3_000), (100, 1_000, 10_000), rounds=3, budget=0.2, read_budget=1.0)


def event(n: int) -> Event:
    """Event ``n`` as ADK's runner appends it: the user's message when even,
    the model's answer when odd, each with a state delta."""
    from google.adk.events import Event, EventActions
    from google.genai import types

    role, author = ("user", "user") if n % 2 == 0 else ("model", "assistant")
    return Event(
        invocation_id=f"turn-{n // 2}",
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text(n))]),
        actions=EventActions(state_delta={"turn": n // 2, "speaker": author}),
    )


def floor_service() -> BaseSessionService:
    """The floor: no store, a session's events kept as JSON strings."""
    from google.adk.events import Event
    from google.adk.sessions import BaseSessionService, Session
    from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse

    class Floor(BaseSessionService):
        """Only the work any service keeping events apart from the caller's
        objects does: encode an event on append, decode on read."""

        def __init__(self) -> None:
            self.headers: dict[str, str] = {}
            self.states: dict[str, dict[str, Any]] = {}
            self.lines: dict[str, list[str]] = {}

        async def create_session(
            self,
            *,
            app_name: str,
            user_id: str,
            state: dict[str, Any] | None = None,
            session_id: str | None = None,
        ) -> Session:
            assert session_id is not None
            session = Session(id=session_id, app_name=app_name, user_id=user_id)
            self.headers[session_id] = session.model_dump_json()
            self.states[session_id] = dict(state or {})
            self.lines[session_id] = []
            return session

        async def get_session(
            self,
            *,
            app_name: str,
            user_id: str,
            session_id: str,
            config: GetSessionConfig | None = None,
        ) -> Session | None:
            lines = self.lines[session_id]
            if config is not None and config.num_recent_events is not None:
                lines = lines[len(lines) - config.num_recent_events :]
            session = Session.model_validate_json(self.headers[session_id])
            session.state = dict(self.states[session_id])
            session.events = [Event.model_validate_json(line) for line in lines]
            return session

        async def list_sessions(
            self, *, app_name: str, user_id: str | None = None, page_size: int | None = None
        ) -> ListSessionsResponse:
            headers = list(self.headers.values())
            if page_size is not None:
                headers = headers[-page_size:]
            sessions = [Session.model_validate_json(header) for header in headers]
            return ListSessionsResponse(sessions=sessions)

        async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
            del self.headers[session_id], self.states[session_id], self.lines[session_id]

        async def append_event(self, session: Session, event: Event) -> Event:
            event = await super().append_event(session, event)
            self.lines[session.id].append(event.model_dump_json(exclude_none=True))
            if event.actions.state_delta:
                self.states[session.id].update(event.actions.state_delta)
            return event

    return Floor()


def ours_on(store: Any) -> BaseSessionService:
    from sessionstore.integrations.adk import StoreSessionService

    return StoreSessionService(store)


# ================================================================ the sides

Opener = Callable[[Path | None], AbstractAsyncContextManager["BaseSessionService"]]
"""A side's service on a database file (None for a side in memory)."""


@asynccontextmanager
async def ours_on_sqlite(path: Path | None) -> AsyncIterator[BaseSessionService]:
    assert path is not None
    async with await SqlStore.open(str(path)) as store:
        yield ours_on(store)


@asynccontextmanager
async def adk_on_sqlite(path: Path | None) -> AsyncIterator[BaseSessionService]:
    from google.adk.sessions import DatabaseSessionService
    from sqlalchemy import event as sqlalchemy_event

    assert path is not None
    service = DatabaseSessionService(f"sqlite+aiosqlite:///{path}")

    def wal(connection: Any, record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    sqlalchemy_event.listen(service.db_engine.sync_engine, "connect", wal)
    try:
        yield service
    finally:
        await service.close()


@asynccontextmanager
async def ours_in_memory(path: Path | None) -> AsyncIterator[BaseSessionService]:
    async with MemoryStore() as store:
        yield ours_on(store)


@asynccontextmanager
async def adk_in_memory(path: Path | None) -> AsyncIterator[BaseSessionService]:
    from google.adk.sessions import InMemorySessionService

    yield InMemorySessionService()


@asynccontextmanager
async def no_store(path: Path | None) -> AsyncIterator[BaseSessionService]:
    yield floor_service()


@dataclass(frozen=True)
class Side:
    """A service: its name, how it opens, and the kind of its prefilled
    databases (None: in memory, filled anew each time)."""

    name: str
    open: Opener
    kind: str | None = None


OURS = Side("StoreSessionService", ours_on_sqlite, "adk-ours")
THEIRS = Side("DatabaseSessionService", adk_on_sqlite, "adk-theirs")
OURS_MEMORY = Side("StoreSessionService, memory", ours_in_memory)
THEIRS_MEMORY = Side("InMemorySessionService", adk_in_memory)
FLOOR = Side("no store", no_store)
GROUPS = ((OURS, THEIRS, FLOOR), (OURS_MEMORY, THEIRS_MEMORY))
"""The sides measured together: the objects a side in memory keeps alive
(every event, as models) would make the collector's passes in the SQLite
sides' rounds longer than an application's, so those come apart."""


async def fill_events(service: BaseSessionService, size: int) -> None:
    session = await service.create_session(app_name=APP, user_id=USER, session_id=CHAT)
    for n in range(size):
        await service.append_event(session, event(n))


async def fill_sessions(service: BaseSessionService, size: int) -> None:
    for n in range(size):
        state = {"topic": f"topic {n}"}
        await service.create_session(app_name=APP, user_id=USER, session_id=f"s{n}", state=state)


Fill = Callable[["BaseSessionService", int], Awaitable[None]]


class Histories:
    """Each side's service on a prefilled session (or set of sessions): a
    new copy of its database, or a new one in memory, filled anew."""

    def __init__(self, work: Path, templates: Templates) -> None:
        self.work, self.templates = work, templates
        self.copies = itertools.count()

    @asynccontextmanager
    async def open(
        self, side: Side, what: str, size: int, fill: Fill
    ) -> AsyncIterator[BaseSessionService]:
        if side.kind is None:
            async with side.open(None) as service:
                await fill(service, size)
                yield service
            return

        async def write(path: Path, size: int) -> None:
            async with side.open(path) as service:
                await fill(service, size)

        target = self.work / f"{side.kind}-{what}-{next(self.copies)}.db"
        await self.templates.copy(f"{side.kind}-{what}", size, write, target)
        async with side.open(target) as service:
            yield service


# ================================================================ the calls


async def get(service: BaseSessionService, window: int | None) -> Session | None:
    from google.adk.sessions.base_session_service import GetSessionConfig

    config = None if window is None else GetSessionConfig(num_recent_events=window)
    return await service.get_session(app_name=APP, user_id=USER, session_id=CHAT, config=config)


def page_argument(service: BaseSessionService) -> str | None:
    """The name ``list_sessions`` takes a page's size by, if it pages."""
    parameters = inspect.signature(service.list_sessions).parameters
    return next((name for name in PAGING if name in parameters), None)


async def list_page(service: BaseSessionService, paged: bool) -> ListSessionsResponse:
    """A page of `PAGE` sessions where ``paged`` and the service pages, else every session."""
    paging = page_argument(service) if paged else None
    if paging is None:
        return await service.list_sessions(app_name=APP, user_id=USER)
    listing = service.list_sessions(app_name=APP, user_id=USER, **{paging: PAGE})
    return await listing


async def append_next(
    service: BaseSessionService, session: Session, events: Iterator[Event]
) -> None:
    await service.append_event(session, next(events))


# ================================================================ the rows


Times = dict[str, list[float]]
"""A figure per round, by side."""


async def each_side(
    services: dict[str, BaseSessionService],
    call: Callable[[BaseSessionService], Awaitable[object]],
    plan: Plan,
    budget: float,
) -> Times:
    """``call`` on every side, round by round, after a first call each."""
    for service in services.values():
        await call(service)
    times: Times = {name: [] for name in services}
    for _ in range(plan.rounds):
        for name, service in services.items():
            times[name].append(await aper_call_within(partial(call, service), budget, READS))
    return times


async def appends(histories: Histories, sides: tuple[Side, ...], size: int, plan: Plan) -> Times:
    """``append_event``, each round on a new copy of every side's session."""
    most = max(4, size // 10)
    times: Times = {side.name: [] for side in sides}
    numbers = itertools.count(size)
    for _ in range(plan.rounds):
        for side in sides:
            async with histories.open(side, "events", size, fill_events) as service:
                session = await get(service, None)
                assert session is not None
                await service.append_event(session, event(next(numbers)))  # the append before
                events = iter([event(next(numbers)) for _ in range(most)])
                call = partial(append_next, service, session, events)
                times[side.name].append(await aper_call_within(call, plan.budget, most))
    return times


async def first_reads(histories: Histories, size: int, plan: Plan) -> Times:
    """A new process's first ``get_session()``, round by round on a new copy:
    the service and its store opened, then every event read (no cache of
    ours, nor the schema check either side makes first, is warm)."""
    times: Times = {side.name: [] for side in (OURS, THEIRS)}
    for _ in range(plan.rounds):
        for side in (OURS, THEIRS):
            assert side.kind is not None
            target = histories.work / f"{side.kind}-first-{next(histories.copies)}.db"
            await histories.templates.copy(f"{side.kind}-events", size, _unfilled, target)
            async with contextlib.AsyncExitStack() as stack:
                started = time.perf_counter()
                service = await stack.enter_async_context(side.open(target))
                await get(service, None)
                times[side.name].append(time.perf_counter() - started)
    return times


async def _unfilled(path: Path, size: int) -> None:
    raise AssertionError("the prefilled database is made by the reads before")


class Rows:
    """The part's figures, by work and size, and the tables they make."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[int, Times]] = {}

    def keep(self, work: str, size: int, times: Times) -> None:
        self.figures.setdefault(work, {}).setdefault(size, {}).update(times)

    def tables(self, paging: str | None) -> list[Table]:
        listed = (
            f"list_sessions, a page of {PAGE} (theirs: every session)"
            if paging
            else "list_sessions, every session (ours does not page)"
        )
        works = {
            "append": ("append_event, {at} events", "0.2x"),
            "window": (f"get_session(num_recent_events={WINDOW}), {{at}} events", "0.5x"),
            "whole": ("get_session(), {at} events", "0.5x"),
            "cold": ("a new process's first get_session(), the store opened, {at} events", None),
            "list": (f"{listed}, {{at}} sessions", "0.2x"),
        }
        pairs = (
            (
                Table("through ADK on SQLite", OURS.name, THEIRS.name),
                OURS,
                THEIRS,
                True,
            ),
            (
                Table(
                    "through ADK in memory, for reference (not durable)",
                    OURS_MEMORY.name,
                    THEIRS_MEMORY.name,
                ),
                OURS_MEMORY,
                THEIRS_MEMORY,
                False,
            ),
            (
                Table(
                    "through ADK: the floor (no store) against ADK on SQLite, the least any "
                    "store could reach",
                    FLOOR.name,
                    THEIRS.name,
                ),
                FLOOR,
                THEIRS,
                False,
            ),
        )
        for table, ours, theirs, targets in pairs:
            for work, (name, target) in works.items():
                for size, times in sorted(self.figures.get(work, {}).items()):
                    if ours.name not in times or theirs.name not in times:
                        continue  # a row of the SQLite sides alone
                    row = name.format(at=f"{size:,}")
                    if targets and target is not None:
                        row += f" (target ≤{target})"
                    table.add(row, times[ours.name], times[theirs.name])
        grows = Table("through ADK: as the session grows", "long", "short")
        for work in ("window", "list"):
            by_size = self.figures.get(work, {})
            if len(by_size) < 2:
                continue
            short, long = by_size[min(by_size)], by_size[max(by_size)]
            name = works[work][0].format(at=f"{max(by_size):,} vs {min(by_size):,}")
            grows.add(f"{OURS.name} {name} (target flat)", long[OURS.name], short[OURS.name])
            reference = f"{THEIRS.name} {name}, for reference"
            grows.add(reference, long[THEIRS.name], short[THEIRS.name])
        return [table for table, *_ in pairs] + [grows]


async def through_adk(work: Path, templates: Templates, quick: bool) -> list[Table]:
    """The ADK part's tables.

    Args:
        work: this run's directory.
        templates: the prefilled databases the runs share.
        quick: small sizes, one round.
    """
    plan = Plan.of(quick)
    histories = Histories(work, templates)
    rows = Rows()
    async with OURS_MEMORY.open(None) as service:
        paging = page_argument(service)
    listing = partial(list_page, paged=paging is not None)
    window, whole = partial(get, window=WINDOW), partial(get, window=None)
    for sides in GROUPS:
        for size in plan.events:
            async with _sides(histories, sides, "events", size, fill_events) as services:
                rows.keep("window", size, await each_side(services, window, plan, plan.budget))
                rows.keep("whole", size, await each_side(services, whole, plan, plan.read_budget))
            rows.keep("append", size, await appends(histories, sides, size, plan))
            if OURS in sides and size == max(plan.events):
                rows.keep("cold", size, await first_reads(histories, size, plan))
        for size in plan.sessions:
            async with _sides(histories, sides, "sessions", size, fill_sessions) as services:
                rows.keep("list", size, await each_side(services, listing, plan, plan.read_budget))
    return rows.tables(paging)


@asynccontextmanager
async def _sides(
    histories: Histories, sides: tuple[Side, ...], what: str, size: int, fill: Fill
) -> AsyncIterator[dict[str, BaseSessionService]]:
    opened: dict[str, BaseSessionService] = {}
    async with contextlib.AsyncExitStack() as stack:
        for side in sides:
            opened[side.name] = await stack.enter_async_context(
                histories.open(side, what, size, fill)
            )
        yield opened
