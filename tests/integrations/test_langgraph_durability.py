"""`StoreSaver`'s lines are as durable as the store's appends, no more:
a store at ``durability="normal"`` commits them as it commits messages
(they survive a kill of the process), one at ``"full"`` syncs them fully
(a power loss too); the crash-recovery journal keeps its full sync."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import require

require("langgraph", "langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from sessionstore import ConfigurationError, JsonlStore, MemoryStore, SqlStore
from sessionstore.integrations.langgraph import StoreSaver
from tests.helpers import traced


def echo(state: MessagesState) -> dict[str, list[AnyMessage]]:
    return {"messages": [AIMessage(content=state["messages"][-1].content)]}


async def a_turn(saver: StoreSaver, number: int) -> None:
    builder: Any = StateGraph(MessagesState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    graph = builder.compile(checkpointer=saver)
    said = HumanMessage(content=f"turn {number}")
    await graph.ainvoke({"messages": [said]}, {"configurable": {"thread_id": "chat"}})


def traced_levels(store: SqlStore) -> tuple[list[str], list[str]]:
    """The statements the store runs from now on and their threads, each
    connection made to set its ``synchronous`` level again at its next
    transaction (as a new one does), so every commit's level is in the trace."""
    for conn in store.database.runner.connections():
        conn.connection.info.pop("synchronous", None)
    threads: list[str] = []
    return traced(store, threads), threads


def commit_levels(statements: list[str], threads: list[str]) -> list[str]:
    """The synchronous level of each commit, from the trace."""
    levels, level = [], {}
    for sql, thread in zip(statements, threads, strict=True):
        if sql.startswith("PRAGMA synchronous="):
            level[thread] = sql.split("=")[1]
        elif sql == "COMMIT":
            levels.append(level.get(thread, "?"))
    return levels


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_a_turn_on_sqlite_commits_at_the_store_s_durability(
    tmp_path: Path, durability: Any
) -> None:
    store = await SqlStore.open(str(tmp_path / "sessions.db"), durability=durability)
    async with store:
        saver = StoreSaver(store)
        await a_turn(saver, 0)
        statements, threads = traced_levels(store)
        await a_turn(saver, 1)
        levels = commit_levels(statements, threads)
        # Checkpoints, writes and messages alike, none synced beyond the store.
        assert levels
        assert set(levels) == {durability.upper()}, levels
        # The crash-recovery journal still syncs fully.
        await store.journal("agent").append_raw(b"x")
        assert commit_levels(statements, threads)[-1] == "FULL"


@pytest.mark.parametrize(("durability", "synced"), [("normal", False), ("full", True)])
async def test_a_turn_on_jsonl_syncs_as_the_store_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: Any, synced: bool
) -> None:
    journal_syncs: list[int] = []
    real = os.fdatasync

    def counted(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("session_journal.jsonl"):
            journal_syncs.append(fd)
        real(fd)

    async with JsonlStore(tmp_path / "sessions", durability=durability) as store:
        saver = StoreSaver(store)
        await a_turn(saver, 0)
        monkeypatch.setattr(os, "fdatasync", counted)
        await a_turn(saver, 1)
        assert bool(journal_syncs) is synced
        journal_syncs.clear()
        await store.journal("agent").append_raw(b"x")  # the recovery journal: fsynced
        assert journal_syncs


async def test_a_journal_durability_that_is_neither_is_refused(tmp_path: Path) -> None:
    for store in (MemoryStore(), JsonlStore(tmp_path), await SqlStore.open(str(tmp_path / "s.db"))):
        async with store:
            with pytest.raises(ConfigurationError, match="'full' or 'store'"):
                store.journal("agent", durability="power")  # type: ignore[arg-type]
            store.journal("agent", durability="store")
