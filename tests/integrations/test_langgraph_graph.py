"""A real LangGraph agent on `StoreSaver`: the same states as on
langgraph's own ``InMemorySaver``.

The graph (tests/integrations/graphs.py) has a tool node, a human's
approval asked by ``interrupt()`` in a subgraph and given by
``Command(resume=...)``; the scenario runs two turns, then travels back
in time by ``checkpoint_id`` (invoked again from an older checkpoint, and
changed there by ``update_state``), and reads every state and history on
the way: values, next, tasks and their interrupts, the subgraph's state,
the checkpoints and their parents, up to ids. On every store kind, and
on ``AsyncSqliteSaver`` too (so the scenario asks nothing of a saver but
what langgraph does). Then a worker running the graph is killed with
SIGKILL mid-run, and run again: it continues from the last checkpoint it
saw acknowledged.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import require

require("langgraph", extra="langgraph")

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command, StateSnapshot

from sessionstore import open_store
from sessionstore.sync import open_store as open_sync_store
from tests.helpers import WORKERS, ForkServer, killed_run
from tests.kinds import StoreTargets
from tests.workers.graph_run import (
    STEPS,
    THREAD,
    Names,
    ScriptedModel,
    agent,
    checkpoint_id,
    drive,
    snapshot,
)

SAVERS = [
    "AsyncSqliteSaver",
    "memory",
    "jsonl",
    "sqlite",
    "postgresql",
    "sqlite-sealed",
    "sqlite-blocking",
]
"""langgraph's SQLite saver, and `StoreSaver` on each store kind, on a
sealed one, and on a blocking `SyncStore` (its async methods run in a
worker thread)."""
TRIP: Any = {"configurable": {"thread_id": "trip"}}


@asynccontextmanager
async def saver_on(
    kind: str, store_targets: StoreTargets, tmp_path: Path
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """A new, empty saver: ``AsyncSqliteSaver``, or `StoreSaver` on a store of ``kind``."""
    if kind == "AsyncSqliteSaver":
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "langgraph.db")) as saver:
            yield saver
        return
    from sessionstore.integrations.langgraph import StoreSaver

    if kind == "sqlite-blocking":
        with open_sync_store(store_targets.new("sqlite")) as blocking:
            yield StoreSaver(blocking)
        return
    async with open_store(store_targets.new(kind), **store_targets.options(kind)) as store:
        yield StoreSaver(store)


async def scenario(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    """The agent's run on ``saver``: what it read at each step, ids renamed."""
    graph = agent(saver)
    names = Names()
    seen: list[Any] = []

    async def state(config: Any) -> StateSnapshot:
        found = await graph.aget_state(config, subgraphs=True)
        seen.append(snapshot(names, found))
        return found

    async def history(config: Any, **options: Any) -> list[StateSnapshot]:
        found = [one async for one in graph.aget_state_history(config, **options)]
        seen.append([snapshot(names, one) for one in found])
        return found

    async def run(given: Any, config: Any) -> None:
        out = await graph.ainvoke(given, config)
        interrupts = [(names(one.id), one.value) for one in out.get("__interrupt__", [])]
        latest = snapshot(names, await graph.aget_state(TRIP))
        seen.append((latest["messages"], latest["checkpoint"], interrupts))

    # A turn: the model calls its tool, answers; the review asks a human, and waits.
    await run({"messages": [HumanMessage("weather in Paris")]}, TRIP)
    waiting = await state(TRIP)
    inner = waiting.tasks[0].state
    assert isinstance(inner, StateSnapshot)
    await state(inner.config)  # the subgraph's own checkpoint, in its namespace
    await run(Command(resume="approved"), TRIP)
    # A second turn, answered at once.
    await run({"messages": [HumanMessage("and in Rome")]}, TRIP)
    await run(Command(resume="fine"), TRIP)
    past = await history(TRIP)
    await history(TRIP, limit=3)
    await history(TRIP, before=past[2].config, limit=4)
    # Time travel: from the checkpoint before the first turn's tool ran, again.
    before_tool = [one for one in past if one.next == ("tools",)][-1]
    await state(before_tool.config)
    await run(None, before_tool.config)
    await run(Command(resume="again"), TRIP)  # the latest: the fork's
    await history(TRIP)
    await state(before_tool.config)  # still there, as it was
    # Changed in the past: the tool call replaced (by its id) by one for Berlin.
    call = before_tool.values["messages"][-1]
    berlin = {"name": "lookup", "args": {"city": "Berlin"}, "id": call.tool_calls[0]["id"]}
    changed = AIMessage(content="", id=call.id, tool_calls=[berlin])
    forked = await graph.aupdate_state(before_tool.config, {"messages": [changed]})
    await state(forked)
    await run(None, forked)
    await run(Command(resume="ok"), TRIP)
    await history(TRIP)
    await state(before_tool.config)
    # A message removed by its id, then a turn more.
    latest = await graph.aget_state(TRIP)
    review = latest.values["messages"][-1]
    await state(await graph.aupdate_state(TRIP, {"messages": [RemoveMessage(id=review.id)]}))
    await run({"messages": [HumanMessage("then Oslo")]}, TRIP)
    await run(Command(resume="last"), TRIP)
    await history(TRIP, limit=6)
    return seen


@pytest.mark.parametrize("kind", SAVERS)
async def test_the_agent_reads_the_same_states_as_on_langgraphs_memory_saver(
    kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    expected = await scenario(InMemorySaver())
    async with saver_on(kind, store_targets, tmp_path) as saver:
        assert await scenario(saver) == expected


async def test_the_scenario_sees_what_each_step_did() -> None:
    # The comparison above is only as good as what the scenario reads.
    seen = await scenario(InMemorySaver())
    histories = [one for one in seen if isinstance(one, list)]
    assert [len(one) for one in histories] == [12, 3, 4, 16, 20, 6]
    waiting = seen[1]
    assert waiting["next"] == ("review",)
    assert waiting["interrupts"][0][1] == {"approve": "In Paris: sunny in Paris."}
    assert waiting["tasks"][0][3]["next"] == ("approve",)  # the subgraph, waiting inside
    assert seen[2]["next"] == ("approve",)  # read by the subgraph's own config
    said = [message[1] for message in seen[-7][0]]
    assert said[-3:] == ["sunny in Berlin", "In Paris: sunny in Berlin.", "reviewed: ok"]
    assert seen[-5]["messages"] == seen[-14]["messages"]  # the past, unchanged
    said = [message[1] for message in seen[-2][0]]
    assert said[3:6] == ["In Paris: sunny in Berlin.", "then Oslo", ""]  # the review removed


KILLS = 12
"""Runs killed at most, each at a random moment of its run."""


async def uncut_run() -> list[Any]:
    """The messages of the worker's run, never cut, on ``InMemorySaver``, ids renamed."""
    graph = agent(InMemorySaver(), ScriptedModel(steps=STEPS))
    await drive(graph)
    messages: list[Any] = snapshot(Names(), await graph.aget_state(THREAD))["messages"]
    return messages


def reported(run: list[str], first: str, last: str) -> list[str]:
    """The ids of the lines ``first ID last`` a run printed whole."""
    return [line.split()[1] for line in run if line.split()[::2] == [first, last]]


async def chain(saver: BaseCheckpointSaver[Any], checkpoint: str) -> list[str]:
    """``checkpoint`` and its ancestors, newest first, by their parents."""
    ids = []
    config: Any = {
        "configurable": {**THREAD["configurable"], "checkpoint_ns": "", "checkpoint_id": checkpoint}
    }
    while config is not None:
        found = await saver.aget_tuple(config)
        assert found is not None, f"checkpoint {config['configurable']['checkpoint_id']} is lost"
        ids.append(found.config["configurable"]["checkpoint_id"])
        config = found.parent_config
    return ids


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgresql"])
async def test_a_graph_killed_mid_run_continues_from_its_last_acknowledged_checkpoint(
    kind: str, store_targets: StoreTargets
) -> None:
    from sessionstore.integrations.langgraph import StoreSaver

    target = store_targets.new(kind)
    runs: list[list[str]] = []
    async with ForkServer(WORKERS / "graph_run.py", target) as server:
        for _ in range(KILLS):
            kill_within = random.uniform(0, 0.1)  # the run sleeps 120 ms after its first
            runs.append(await killed_run(server, [target], kill_within, after="checkpoint"))
            if runs[-1][-1] == "end":
                break
        else:
            runs.append(await killed_run(server, [target], None))
    assert runs[-1][-1] == "end"
    cut = [run for run in runs if run[-1] != "end"]
    assert any(line.startswith("checkpoint") for run in cut for line in run), "no kill fell mid-run"
    async with open_store(target) as store:
        saver = StoreSaver(store)
        graph = agent(saver)
        latest = await graph.aget_state(THREAD)
        last = checkpoint_id(latest.config)
        assert last is not None
        kept = await chain(saver, last)
        acknowledged: list[str] = []  # by the runs so far
        for run in runs:
            resumed = reported(run, "resumed", "latest")
            if resumed and acknowledged:
                # It continued from the last acknowledged, or from one saved after it.
                assert acknowledged[-1] in await chain(saver, resumed[0])
            acknowledged += reported(run, "checkpoint", "stored")
        # Every checkpoint acknowledged is kept, on the line the thread went on.
        assert set(acknowledged) <= set(kept)
        assert latest.next == ()
        assert snapshot(Names(), latest)["messages"] == await uncut_run()
