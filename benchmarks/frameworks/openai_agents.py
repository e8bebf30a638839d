"""openai-agents: `StoreSession` against the SDK's own sessions, ``SQLiteSession``
on SQLite and ``SQLAlchemySession`` on PostgreSQL."""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from messages import text
from results import Table, aper_call_within

from sessionstore import SqlStore

from .base import BATCH, NAME, READS, Figures, Plan, Templates, turns_at_most

if TYPE_CHECKING:
    from agents import TResponseInputItem
    from agents.memory import Session


def item(n: int) -> TResponseInputItem:
    """Item ``n``: a user's message when even, an assistant's when odd."""
    if n % 2:
        return {"role": "assistant", "content": text(n)}
    return {"role": "user", "content": text(n)}


async def add_in_batches(session: Session, size: int) -> None:
    for start in range(0, size, BATCH):
        await session.add_items([item(n) for n in range(start, min(size, start + BATCH))])


async def turn(session: Session, numbers: Iterator[int]) -> None:
    """A Runner's turn: the history read, then the user's item and the answer added."""
    await session.get_items()
    n = next(numbers)
    await session.add_items([item(n), item(n + 1)])


async def add_one(session: Session, numbers: Iterator[int]) -> None:
    await session.add_items([item(next(numbers))])


@dataclass
class Pair:
    """Both sides on one history: the long-lived objects, and how to make new
    ones on it: as a server's request would (ours on the same store object),
    and as a new process would (ours on a store object of its own)."""

    ours: Session
    theirs: Session
    new_ours: Callable[[], Session]
    new_theirs: Callable[[], Session]
    release: Callable[[Session], None]  # what one of their new objects needs at the end
    cold_ours: Callable[[], AbstractAsyncContextManager[Session]]


def _close(session: Session) -> None:
    session.close()  # type: ignore[attr-defined]  # a SQLiteSession: its connections, its lock


def _leave(session: Session) -> None:
    pass


class OnSqlite:
    """`StoreSession` on a SQLite store against ``SQLiteSession``, each on a
    file of its own."""

    def __init__(self, work: Path, templates: Templates) -> None:
        from peers import OpenAIAgents

        self.work, self.templates = work, templates
        self.their_session = OpenAIAgents().session  # on synchronous=NORMAL too
        self.copies = itertools.count()

    async def fill_ours(self, path: Path, size: int) -> None:
        from sessionstore.integrations.openai_agents import StoreSession

        async with await SqlStore.open(str(path)) as store:
            await add_in_batches(StoreSession(store, NAME), size)

    async def fill_theirs(self, path: Path, size: int) -> None:
        session = self.their_session(NAME, path)
        await add_in_batches(session, size)
        session.close()

    @asynccontextmanager
    async def history(self, size: int) -> AsyncIterator[Pair]:
        """Both sides on new copies of the prefilled databases."""
        from sessionstore.integrations.openai_agents import StoreSession

        copy = next(self.copies)
        ours_at = self.work / f"agents-ours-{copy}.db"
        theirs_at = self.work / f"agents-theirs-{copy}.db"
        await self.templates.copy("agents-ours", size, self.fill_ours, ours_at)
        await self.templates.copy("agents-theirs", size, self.fill_theirs, theirs_at)
        store = await SqlStore.open(str(ours_at))

        def new_ours() -> Session:
            return StoreSession(store, NAME)

        def new_theirs() -> Session:
            return self.their_session(NAME, theirs_at)

        theirs = self.their_session(NAME, theirs_at)
        cold = partial(_on_new_store, str(ours_at), NAME)
        try:
            yield Pair(StoreSession(store, NAME), theirs, new_ours, new_theirs, _close, cold)
        finally:
            theirs.close()
            await store.close()

    def turns(self, size: int, reads: Pair) -> AbstractAsyncContextManager[Pair]:
        """A round of turns on new copies: each round starts at ``size`` items."""
        return self.history(size)


class OnPostgres:
    """`StoreSession` on our PostgreSQL store against ``SQLAlchemySession``,
    on one server. Each run fills conversations of its own; their tables are
    dropped at its end (`OpenAIAgentsOnPostgres`)."""

    def __init__(self, url: str, store: SqlStore) -> None:
        from peers import OpenAIAgentsOnPostgres

        self.store, self.peer, self.url = store, OpenAIAgentsOnPostgres(url), url
        self.tag = uuid.uuid4().hex[:8]

    @asynccontextmanager
    async def history(self, size: int) -> AsyncIterator[Pair]:
        from sessionstore.integrations.openai_agents import StoreSession

        name = f"fw-{self.tag}-{size}"

        def new_ours() -> Session:
            return StoreSession(self.store, name)

        def new_theirs() -> Session:
            return self.peer.open(name)  # type: ignore[no-any-return]

        ours, theirs = StoreSession(self.store, name), new_theirs()
        await add_in_batches(ours, size)
        await add_in_batches(theirs, size)
        cold = partial(_on_new_store, self.url, name)
        yield Pair(ours, theirs, new_ours, new_theirs, _leave, cold)

    @asynccontextmanager
    async def turns(self, size: int, reads: Pair) -> AsyncIterator[Pair]:
        """New objects on the same conversations, which grow round by round."""
        yield dataclasses.replace(reads, ours=reads.new_ours(), theirs=reads.new_theirs())


@asynccontextmanager
async def _on_new_store(target: str, name: str) -> AsyncIterator[Session]:
    """A session on a store object of its own, as a new process opens it."""
    from sessionstore.integrations.openai_agents import StoreSession

    async with await SqlStore.open(target) as store:
        yield StoreSession(store, name)


async def openai_agents(
    backend: OnSqlite | OnPostgres, plan: Plan, table: Table
) -> dict[int, Figures]:
    """The openai-agents rows on ``backend``, in ``table``, grouped by work;
    returns the ``get_items(limit=20)`` figures at each size, for the flat rows."""
    rows: dict[str, list[tuple[str, Figures]]] = {
        kind: [] for kind in ("all", "limit", "turn", "add", "request", "cold")
    }
    limited: dict[int, Figures] = {}

    async def both(
        ours: Callable[[], Awaitable[object]], theirs: Callable[[], Awaitable[object]], most: int
    ) -> Figures:
        mine, their = [], []
        for _ in range(plan.rounds):
            mine.append(await aper_call_within(ours, plan.budget, most))
            their.append(await aper_call_within(theirs, plan.budget, most))
        return mine, their

    for size in sorted({*plan.agents, plan.longest}):
        at = f"{size:,} items"
        async with backend.history(size) as pair:
            warm = None if size in plan.agents else 20  # the longest is read with a limit only
            await pair.ours.get_items(warm)
            await pair.theirs.get_items(warm)
            limited[size] = await both(
                partial(pair.ours.get_items, limit=20),
                partial(pair.theirs.get_items, limit=20),
                READS,
            )
            rows["limit"].append((f"get_items(limit=20), {at} (target ≤1x)", limited[size]))
            if size not in plan.agents:
                continue
            figures = await both(pair.ours.get_items, pair.theirs.get_items, READS)
            rows["all"].append((f"get_items(), {at} (target ≤0.5x)", figures))
            if size == plan.cold:
                name = f"first get_items() on a new store object (a new process), {at}"
                rows["cold"].append((name, await _cold(pair, plan)))
            target = " (target ≤0.5x)" if size >= 1_000 else ""
            name = f"a turn: get_items(), then add_items([user, assistant]), {at}{target}"
            rows["turn"].append((name, await _turns(backend, pair, size, plan)))
            numbers = itertools.count(20_000_000)
            figures = await both(
                partial(add_one, pair.ours, numbers), partial(add_one, pair.theirs, numbers), 200
            )
            rows["add"].append((f"add_items([one item]), {at} (target ≤1x)", figures))
            name = f"a server's request: a new session object, then a turn, {at}"
            rows["request"].append((name, await _requests(pair, size, plan)))
    for kind in rows.values():
        for name, figures in kind:
            table.add(name, *figures)
    return limited


async def _turns(backend: OnSqlite | OnPostgres, pair: Pair, size: int, plan: Plan) -> Figures:
    """Turns, round by round, each side after a turn before (a Runner's
    session has read and written the history already: the first write
    after opening a store, with its one-time work, is not a turn's cost)."""
    mine: list[float] = []
    their: list[float] = []
    for _ in range(plan.rounds):
        async with backend.turns(size, pair) as turns:
            for side, times in ((turns.ours, mine), (turns.theirs, their)):
                await turn(side, itertools.count(5_000_000, 2))  # the turn before
                call = partial(turn, side, itertools.count(10_000_000, 2))
                times.append(await aper_call_within(call, plan.turn_budget, turns_at_most(size)))
    return mine, their


async def _requests(pair: Pair, size: int, plan: Plan) -> Figures:
    """Turns each on a new session object, as a server makes one for each
    request (ours on the one store object the server opened)."""
    numbers = itertools.count(30_000_000, 2)

    async def ours() -> None:
        await turn(pair.new_ours(), numbers)

    async def theirs() -> None:
        session = pair.new_theirs()
        try:
            await turn(session, numbers)
        finally:
            pair.release(session)

    mine: list[float] = []
    their: list[float] = []
    for _ in range(plan.rounds):
        mine.append(await aper_call_within(ours, plan.turn_budget, turns_at_most(size)))
        their.append(await aper_call_within(theirs, plan.turn_budget, turns_at_most(size)))
    return mine, their


async def _cold(pair: Pair, plan: Plan) -> Figures:
    """The first ``get_items()`` of a new object, round by round: ours on a
    new store object, as a new process makes it."""
    mine: list[float] = []
    their: list[float] = []
    for _ in range(plan.rounds):
        async with pair.cold_ours() as fresh_ours:
            mine.append(await aper_call_within(fresh_ours.get_items, 0, 1))
        fresh = pair.new_theirs()
        their.append(await aper_call_within(fresh.get_items, 0, 1))
        pair.release(fresh)
    return mine, their
