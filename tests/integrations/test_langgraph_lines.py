"""`StoreSaver`'s checkpoint lines are short (docs/wire-format.md): integer
versions, ``v`` and the conversation's session left out, ``ts`` as an
offset from the time in the checkpoint's id; and what they leave out
comes back exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integrations import require

require("langgraph", "langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import START, MessagesState, StateGraph

import sessionstore.integrations.langgraph_records as records
from sessionstore import SqlStore
from sessionstore.integrations.langgraph import StoreSaver

THREAD: Any = {"configurable": {"thread_id": "chat"}}


def echo(state: MessagesState) -> dict[str, list[AnyMessage]]:
    return {"messages": [AIMessage(content=state["messages"][-1].content)]}


async def test_a_turn_s_checkpoint_lines_leave_out_what_they_can(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        saver = StoreSaver(store)
        builder: Any = StateGraph(MessagesState)
        builder.add_node("echo", echo)
        builder.add_edge(START, "echo")
        graph = builder.compile(checkpointer=saver)
        for number in range(2):
            await graph.ainvoke({"messages": [HumanMessage(content=f"hi {number}")]}, THREAD)
        lines = [
            json.loads(line)
            for line in (await store.journal("langgraph:chat").read_bytes()).splitlines()
        ]
        checkpoints = [line for line in lines if line["key"].startswith("c/")]
        latest = checkpoints[-1]
        assert "v" not in latest
        assert isinstance(latest["ts"], int)
        assert abs(latest["ts"]) < 1_000_000  # microseconds from the id's time
        assert latest["messages"][0] == 4  # [count, last]: the session is "chat"'s
        assert len(latest["messages"]) == 2
        assert all(isinstance(version, int) for version in latest["versions"].values())
        got = await saver.aget_tuple(THREAD)
        assert got is not None
        assert got.checkpoint["v"] == 4
        assert got.checkpoint["ts"].endswith("+00:00")
        assert [m.content for m in got.checkpoint["channel_values"]["messages"]] == [
            "hi 0",
            "hi 0",
            "hi 1",
            "hi 1",
        ]


async def test_a_ts_or_v_of_another_form_is_kept_as_given(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        saver = StoreSaver(store)
        made = [
            ("1f0000000000000a", "2026-01-01T00:00:00+00:00", 1),  # no UUID: no time in the id
            (str(uuid6(clock_seq=1)), "2026-01-01T00:00:00Z", 4),  # "Z": not isoformat's
            (str(uuid6(clock_seq=2)), "2026-01-01T00:00:00", 4),  # no time zone
            (str(uuid6(clock_seq=3)), "2026-01-01T00:00:00.000001+02:00", 5),
            (str(uuid6(clock_seq=4)), "2026-01-01T00:00:00+00:00", 4),  # an offset far off
        ]
        for checkpoint_id, ts, v in made:
            checkpoint = Checkpoint(
                v=v,
                id=checkpoint_id,
                ts=ts,
                channel_values={},
                channel_versions={},
                versions_seen={},
                updated_channels=None,
            )
            config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            stored = await saver.aput(config, checkpoint, {}, {})
            got = await saver.aget_tuple(stored)
            assert got is not None
            assert (got.checkpoint["ts"], got.checkpoint["v"]) == (ts, v)


async def test_a_write_of_the_input_s_member_is_kept_once_and_reads_back(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        saver = StoreSaver(store)
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        stored = []
        for number in range(2):
            given: list[Any] = [HumanMessage(content=f"hello {number}", id=f"m{number}")]
            checkpoint = Checkpoint(
                v=4,
                id=str(uuid6(clock_seq=number)),
                ts="2026-01-01T00:00:00+00:00",
                channel_values={"__start__": {"messages": given}},
                channel_versions={"__start__": number + 1},
                versions_seen={},
                updated_channels=["__start__"],
            )
            at = await saver.aput(config, checkpoint, {}, {"__start__": number + 1})
            if number:  # changed in place after its checkpoint: its own bytes are kept
                given.append(AIMessage(content="more", id="m9"))
            await saver.aput_writes(at, [("messages", given)], "task", "~__pregel_pull, __start__")
            stored.append((at, [m.content for m in given]))
        lines = (await store.journal("langgraph:t").read_bytes()).splitlines()
        writes = [json.loads(line) for line in lines if line.startswith(b'{"key":"w/')]
        assert ["of" in write for write in writes] == [True, False]
        for at, said in stored:
            got = await saver.aget_tuple(at)
            assert got is not None
            assert got.pending_writes is not None
            ((task, channel, value),) = got.pending_writes
            assert (task, channel, [m.content for m in value]) == ("task", "messages", said)


def test_a_write_s_key_holds_a_uuid_in_22_characters_and_any_id_comes_back() -> None:
    checkpoint = "1f1ef291-0618-6ff2-812a-45c692317744"
    for task in (
        "9b8206f8-eb9f-8c3e-1c61-b40a61f171fc",
        "task",
        "~task",
        "%7Etask",
        "a/b",
        "9B8206F8-EB9F-8C3E-1C61-B40A61F171FC",  # not as uuid writes one: kept as given
    ):
        key = records.write_key("ns", checkpoint, task, 2)
        assert key.startswith(records.write_prefix("ns", checkpoint))
        assert records.write_parts(key) == (task, 2)
    key = records.write_key("", checkpoint, "9b8206f8-eb9f-8c3e-1c61-b40a61f171fc", 0)
    assert len(key) == len("w//") + 23 + 1 + 23 + len("/0")


async def test_a_none_value_leaves_its_value_out_and_reads_back(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        saver = StoreSaver(store)
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        checkpoint = Checkpoint(
            v=4,
            id=str(uuid6(clock_seq=1)),
            ts="2026-01-01T00:00:00+00:00",
            channel_values={"branch": None, "other": 0},
            channel_versions={"branch": 1, "other": 1},
            versions_seen={},
            updated_channels=None,
        )
        at = await saver.aput(config, checkpoint, {}, {"branch": 1, "other": 1})
        await saver.aput_writes(at, [("branch", None), ("other", 0)], "task")
        lines = [
            json.loads(line)
            for line in (await store.journal("langgraph:t").read_bytes()).splitlines()
        ]
        held = {
            line["key"].split("/")[2]: "value" in line for line in lines if line["key"][0] == "b"
        }
        assert held == {"branch": False, "other": True}
        assert ["value" in line for line in lines if line["key"][0] == "w"] == [False, True]
        got = await saver.aget_tuple(at)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"branch": None, "other": 0}
        assert got.pending_writes == [("task", "branch", None), ("task", "other", 0)]
