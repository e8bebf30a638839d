"""The LangGraph part of the benchmark ("through LangGraph"): a chat graph
run turn after turn on `StoreSaver` over a SQLite store, against
langgraph's own checkpointers, side by side in one run.

The graph is the one LangGraph's users start from: ``MessagesState``
and one node that echoes the user's message (texts of some 260 bytes,
benchmarks/messages.py), compiled with a checkpointer and invoked once a
turn on one thread, with the user's message alone, as LangGraph's
documentation shows. Its sides:

- `StoreSaver` on a SQLite store (`SqlStore`), and on one at
  ``durability="full"``, whose every commit syncs fully as
  ``AsyncSqliteSaver``'s do (its row against that saver is the like for like);
- ``AsyncSqliteSaver`` (langgraph-checkpoint-sqlite), as
  ``from_conn_string`` opens it;
- the same, the messages channel declared as langgraph's beta
  ``DeltaChannel`` (``Annotated[list, DeltaChannel(_messages_delta_reducer)]``,
  as langgraph 1.2's ``_messages_delta_reducer`` documents it): its
  checkpoints keep only what changed, a full snapshot every 100 updates;
- ``InMemorySaver``, in memory, not durable (for reference);
- the graph with no checkpointer, the caller carrying the messages and
  passing them all at each turn: the floor of any checkpointer.

A round fills one thread per side to the longest of `Plan.turns` turns.
When the thread reaches each length the round takes the bytes on disk of
its file (the write-ahead log checkpointed into it first, as
benchmarks/size.py does), and the mean time of a turn over the last tenth
of the turns before it (the last 20 at least); at the lengths of
`Plan.reads` it times ``aget_tuple`` of the latest checkpoint and
``alist(limit=10)``, as the mean of calls in a row for half a second
(50 ms with --quick). Every row is the median of the rounds
(3; with --quick, 1, at 10, 30 and 100 turns).

Run alone, it prints each side's figures, for a profile of one side::

    .venv/bin/python benchmarks/checkpoints.py [--quick] [--side NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sqlite3
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, cast

from messages import text
from results import Table, aper_call_within

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver

THREAD: RunnableConfig = {"configurable": {"thread_id": "chat"}}
"""The conversation, on every side."""
WINDOW = 20
"""Turns a turn's figure is the mean of, at least (the last tenth, past 200 turns)."""
READS_AT_MOST = 1_000


@dataclass(frozen=True)
class Plan:
    """The lengths a round measures at, the lengths reads are timed at, the
    rounds, and the seconds of calls in a row for a read's figure: long
    enough for the collector's full passes, which a read's allocations bring
    every so often in a process holding 2,000 messages, to land in every
    round as they do in an application, and not in one round in three."""

    turns: tuple[int, ...]
    reads: tuple[int, ...]
    rounds: int
    read_budget: float

    @classmethod
    def of(cls, quick: bool) -> Plan:
        if quick:
            return cls(turns=(10, 30, 100), reads=(10, 100), rounds=1, read_budget=0.05)
        return cls(turns=(100, 300, 1_000), reads=(100, 1_000), rounds=3, read_budget=0.5)


@dataclass
class Figures:
    """One side's figures, by thread length: a list of a figure a round."""

    turn: dict[int, list[float]] = field(default_factory=dict)
    size: dict[int, list[float]] = field(default_factory=dict)
    latest: dict[int, list[float]] = field(default_factory=dict)
    listed: dict[int, list[float]] = field(default_factory=dict)


def delta_state() -> type:
    """The state class of the DeltaChannel side (built on use: langgraph loads lazily)."""
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph.message import _messages_delta_reducer

    # Spelled as a call: this module's annotations are strings, which
    # langgraph would evaluate where DeltaChannel is not in scope.
    channel = Annotated[list[Any], DeltaChannel(_messages_delta_reducer)]
    return cast(type, TypedDict("DeltaMessages", {"messages": channel}))  # type: ignore[operator]


def chat_graph(state: type, checkpointer: BaseCheckpointSaver[Any] | None) -> Any:
    """The chat graph: one node echoing the last message, compiled."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, StateGraph

    def echo(values: Any) -> dict[str, list[BaseMessage]]:
        return {"messages": [AIMessage(content=values["messages"][-1].content)]}

    builder: Any = StateGraph(state)  # a state class made at run time
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    return builder.compile(checkpointer=checkpointer)


@dataclass(frozen=True)
class Side:
    """A checkpointer to run the graph on: ``open`` yields it (None: no
    checkpointer) on a file at the path given, ``durable`` when it has one."""

    name: str
    open: Callable[[Path], AbstractAsyncContextManager[BaseCheckpointSaver[Any] | None]]
    state: Callable[[], type]
    durable: bool = True


def messages_state() -> type:
    from langgraph.graph import MessagesState

    return MessagesState


@asynccontextmanager
async def store_saver(path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from sessionstore import SqlStore
    from sessionstore.integrations.langgraph import StoreSaver

    async with await SqlStore.open(str(path)) as store:
        yield StoreSaver(store)


@asynccontextmanager
async def store_saver_full(path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """`StoreSaver` on a store at ``durability="full"``: every commit synced
    fully, as ``AsyncSqliteSaver``'s (SQLite's default) are."""
    from sessionstore import SqlStore
    from sessionstore.integrations.langgraph import StoreSaver

    async with await SqlStore.open(str(path), durability="full") as store:
        yield StoreSaver(store)


@asynccontextmanager
async def sqlite_saver(path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


@asynccontextmanager
async def memory_saver(path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.memory import InMemorySaver

    yield InMemorySaver()


@asynccontextmanager
async def no_saver(path: Path) -> AsyncIterator[None]:
    yield None


OURS = Side("StoreSaver", store_saver, messages_state)
OURS_FULL = Side('StoreSaver, durability="full"', store_saver_full, messages_state)
SQLITE = Side("AsyncSqliteSaver", sqlite_saver, messages_state)
DELTA = Side("AsyncSqliteSaver, DeltaChannel", sqlite_saver, delta_state)
MEMORY = Side("InMemorySaver", memory_saver, messages_state, durable=False)
FLOOR = Side("no checkpointer", no_saver, messages_state, durable=False)
SIDES = (OURS, OURS_FULL, SQLITE, DELTA, MEMORY, FLOOR)


def on_disk(path: Path) -> int:
    """Bytes of the database file once its write-ahead log is checkpointed
    into it (and of what the log still holds, were a reader in the way)."""
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def fill(side: Side, path: Path, plan: Plan, figures: Figures) -> None:
    """One round: a thread of ``side`` grown to the longest length of
    ``plan``, its figures taken at each length on the way."""
    from langchain_core.messages import HumanMessage

    async with side.open(path) as saver:
        graph = chat_graph(side.state(), saver)
        carried: list[BaseMessage] = []  # what the caller keeps with no checkpointer
        took: list[float] = []
        for turn in range(1, max(plan.turns) + 1):
            said = HumanMessage(content=text(2 * turn))
            started = time.perf_counter()
            if saver is None:
                carried = (await graph.ainvoke({"messages": [*carried, said]}))["messages"]
            else:
                await graph.ainvoke({"messages": [said]}, THREAD)
            took.append(time.perf_counter() - started)
            if turn in plan.turns:
                window = took[-max(WINDOW, turn // 10) :]
                figures.turn.setdefault(turn, []).append(statistics.fmean(window))
                if side.durable:
                    figures.size.setdefault(turn, []).append(on_disk(path))
            if turn in plan.reads and saver is not None:
                await reads(saver, turn, figures, plan.read_budget)


async def reads(
    saver: BaseCheckpointSaver[Any], turn: int, figures: Figures, budget: float
) -> None:
    """The latest checkpoint, and a page of ten, each timed as the mean of calls in a row."""

    async def latest() -> object:
        return await saver.aget_tuple(THREAD)

    async def listed() -> list[object]:
        return [found async for found in saver.alist(THREAD, limit=10)]

    assert await latest() is not None
    assert len(await listed()) == 10
    figures.latest.setdefault(turn, []).append(
        await aper_call_within(latest, budget, READS_AT_MOST)
    )
    figures.listed.setdefault(turn, []).append(
        await aper_call_within(listed, budget, READS_AT_MOST)
    )


async def measure(sides: tuple[Side, ...], plan: Plan) -> dict[str, Figures]:
    """Each side's figures over ``plan.rounds`` rounds, the sides in turn in each round."""
    measured = {side.name: Figures() for side in sides}
    with tempfile.TemporaryDirectory(prefix="sessionstore-langgraph-") as work:
        for round_ in range(plan.rounds):
            for n, side in enumerate(sides):
                path = Path(work) / f"{n}-{round_}.db"
                await fill(side, path, plan, measured[side.name])
                remove(path)  # AsyncSqliteSaver's is 1.4 GB at 1,000 turns
    return measured


def remove(path: Path) -> None:
    """A database file and its write-ahead log, if they were made."""
    for made in path.parent.glob(f"{path.name}*"):
        made.unlink()


def installed() -> bool:
    import importlib.util

    return all(
        importlib.util.find_spec(module) is not None
        for module in ("langgraph", "langgraph.checkpoint.sqlite")
    )


TARGETS = {SQLITE.name: {"turn": "0.1x"}, DELTA.name: {"size": "0.25x"}, FLOOR.name: {"turn": "3x"}}
"""Issue 51's targets for StoreSaver against each side, at the longest thread."""


def against(side: Side, ours: Figures, theirs: Figures, plan: Plan, us: Side = OURS) -> Table:
    """StoreSaver's figures (``us``: which store) beside ``side``'s, each
    row with its target if it has one."""
    longest = max(plan.turns)
    targets = TARGETS.get(side.name, {}) if us is OURS else {}

    def named(what: str, figure: str, turns: int) -> str:
        target = targets.get(figure) if turns == longest else None
        return f"{what} at {turns:,} turns" + (f" (target ≤{target})" if target else "")

    note = {MEMORY.name: " (in memory, not durable)", FLOOR.name: " (the floor)"}
    title = f"through LangGraph: a chat graph, {us.name} against {side.name}"
    table = Table(title + note.get(side.name, ""), us.name, side.name)
    for turns in plan.turns if side.durable else ():
        sizes = ours.size[turns], theirs.size[turns]
        table.add(named("bytes on disk", "size", turns), *sizes, unit="bytes")
    for turns in plan.turns:
        table.add(named("a turn", "turn", turns), ours.turn[turns], theirs.turn[turns])
    if side is SQLITE:
        for turns in plan.reads:
            latest, listed = (
                (ours.latest[turns], theirs.latest[turns]),
                (ours.listed[turns], theirs.listed[turns]),
            )
            table.add(f"aget_tuple, the latest, at {turns:,} turns", *latest)
            table.add(f"alist(limit=10) at {turns:,} turns", *listed)
    return table


def growth(measured: dict[str, Figures], plan: Plan) -> Table:
    """Each side at its longest thread against itself at its shortest."""
    table = Table("through LangGraph: as the thread grows", "long thread", "short thread")
    ours = measured[OURS.name]
    short, long = min(plan.turns), max(plan.turns)
    first, last = min(plan.reads), max(plan.reads)
    turns, reads = f"{long:,} vs {short:,} turns", f"{last:,} vs {first:,} turns"
    table.add(f"StoreSaver, a turn, {turns} (target ≤2x)", ours.turn[long], ours.turn[short])
    table.add(
        f"StoreSaver, aget_tuple, {reads} (target ≤1.3x)", ours.latest[last], ours.latest[first]
    )
    table.add(
        f"StoreSaver, alist(limit=10), {reads} (target ≤1.3x)",
        ours.listed[last],
        ours.listed[first],
    )
    # What was said grows as the turns: linear is their ratio, or less (the schema's pages).
    linear = f"linear: ≤{long / short:.0f}x"
    table.add(
        f"StoreSaver, bytes on disk, {turns} ({linear})",
        ours.size[long],
        ours.size[short],
        unit="bytes",
    )
    for side in (SQLITE, DELTA, MEMORY, FLOOR):
        theirs = measured[side.name]
        table.add(
            f"{side.name}, a turn, {turns}, for reference", theirs.turn[long], theirs.turn[short]
        )
    return table


async def checkpoints(quick: bool) -> list[Table]:
    """The part's tables: StoreSaver against each of langgraph's sides, then
    each side at the longest thread against itself at the shortest."""
    if not installed():
        print("\n(through LangGraph skipped: pip install -e '.[bench]')")
        return []
    plan = Plan.of(quick)
    measured = await measure(SIDES, plan)
    ours = measured[OURS.name]
    tables = [
        against(side, ours, measured[side.name], plan)
        for side in SIDES
        if side not in (OURS, OURS_FULL)
    ]
    full = against(SQLITE, measured[OURS_FULL.name], measured[SQLITE.name], plan, OURS_FULL)
    return [*tables, full, growth(measured, plan)]


def show(name: str, figures: Figures) -> None:
    print(f"\n{name}")
    for turns, took in figures.turn.items():
        line = f"  {turns:>6,} turns: a turn {statistics.median(took) * 1e3:8.2f} ms"
        if turns in figures.size:
            line += f", {statistics.median(figures.size[turns]) / 1e6:9.2f} MB on disk"
        if turns in figures.latest:
            line += f", aget_tuple {statistics.median(figures.latest[turns]) * 1e3:.3f} ms"
            line += f", alist(limit=10) {statistics.median(figures.listed[turns]) * 1e3:.3f} ms"
        print(line, flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10 to 100 turns, one round")
    parser.add_argument(
        "--side",
        action="append",
        choices=[side.name for side in SIDES],
        help="run this side alone (repeatable)",
    )
    parser.add_argument("--rounds", type=int, help="rounds (3 unless --quick)")
    args = parser.parse_args()
    sides = tuple(side for side in SIDES if not args.side or side.name in args.side)
    plan = Plan.of(args.quick)
    if args.rounds:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    for name, figures in (await measure(sides, plan)).items():
        show(name, figures)


if __name__ == "__main__":
    asyncio.run(main())
