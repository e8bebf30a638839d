"""Tools run once across crashes, through each framework's own tool slot:
`once_tool` for openai-agents, `OnceToolset` for pydantic-ai
(docs/effects.md). A real turn, killed (SIGKILL) just after a tool ran and
run again until nothing runs, runs each call exactly once: a call with a
recorded outcome never runs again, and one the kill left in doubt is
settled by a check of the world it changed."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.helpers import WORKERS, ForkServer, killed_run
from tests.integrations import require

require("agents", extra="openai-agents")
require("pydantic_ai", extra="pydantic-ai")
require("langchain_core", extra="langchain")

from agents import Agent, Runner, function_tool
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

from sessionstore import EffectInDoubtError, SessionStore, open_store
from sessionstore.integrations.langchain import OnceTool
from sessionstore.integrations.openai_agents import StoreSession, once_tool
from sessionstore.integrations.pydantic_ai import OnceToolset
from sessionstore.sync import SyncStore
from tests.integrations.scripted import NO_TRACING, ScriptedModel, answer, calls

KILLS = 12  # at most: the runs stop once every call is recorded
CALLS = {"openai-agents": [f"n{n}" for n in range(6)], "pydantic-ai": ["a", "b", "c"]}


async def test_an_openai_agents_turn_run_again_gets_the_recorded_outputs(
    async_store: SessionStore,
) -> None:
    sent: list[str] = []

    @function_tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    effects = async_store.journal("agent").effects
    tool = once_tool(send, effects, session="chat")
    for _ in range(2):  # the same turn twice: a replay after a crash
        model = ScriptedModel(calls(1, 2), answer("Sent.", "msg_1"))
        agent = Agent(name="a", instructions="Send.", model=model, tools=[tool])
        result = await Runner.run(
            agent, "go", session=StoreSession(async_store, "chat"), run_config=NO_TRACING
        )
        assert result.final_output == "Sent."
    assert sorted(sent) == ["u1", "u2"]  # run side by side: in either order
    states = {state.key: (state.state, state.tool) for state in await effects.read()}
    assert states == {"chat:call_1": ("done", "send"), "chat:call_2": ("done", "send")}
    assert await effects.result("chat:call_1") == "sent to u1"


async def test_a_pydantic_ai_run_again_gets_the_recorded_results(
    async_store: SessionStore,
) -> None:
    sent: list[str] = []

    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    effects = async_store.journal("agent").effects
    for _ in range(2):
        toolset = OnceToolset(FunctionToolset([send]), effects, session="chat")
        result = await PydanticAgent(TestModel(), toolsets=[toolset]).run("go")
        assert "sent to" in result.output
    assert len(sent) == 1
    (state,) = await effects.read()
    assert (state.state, state.tool, state.session) == ("done", "send", "chat")


async def test_a_langchain_tool_call_run_again_gets_the_recorded_tool_message(
    async_store: SessionStore,
) -> None:
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    once = OnceTool(send, async_store.journal("agent").effects, session="thread-1")
    assert (once.name, once.description, once.args) == (send.name, send.description, send.args)
    call = {"type": "tool_call", "id": "call_9", "name": "send", "args": {"to": "ada"}}
    first = await once.ainvoke(call)
    again = await once.ainvoke(call)
    assert isinstance(again, ToolMessage)
    assert (again.content, again.tool_call_id, again.name) == ("sent to ada", "call_9", "send")
    assert again == first
    assert sent == ["ada"]
    (state,) = await async_store.journal("agent").effects.read()
    assert (state.key, state.state) == ("thread-1:call_9", "done")


def test_a_langchain_tool_on_a_blocking_store_keyed_by_its_arguments(
    sync_store: SyncStore,
) -> None:
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    effects = sync_store.journal("agent").effects
    once = OnceTool(send, effects, key=lambda args: f"mail-to-{args['to']}")
    assert once.invoke({"to": "bob"}) == once.invoke({"to": "bob"}) == "sent to bob"
    assert sent == ["bob"]
    assert [state.key for state in effects.read()] == ["mail-to-bob"]


async def test_a_call_left_in_doubt_ends_the_run_until_checked(
    async_store: SessionStore,
) -> None:
    effects = async_store.journal("agent").effects

    class Killed(BaseException):
        pass

    def crash(to: str) -> str:
        """Send a message, and die."""
        raise Killed

    with pytest.raises(Killed):
        await PydanticAgent(
            TestModel(), toolsets=[OnceToolset(FunctionToolset([crash]), effects)]
        ).run("go")
    toolset = OnceToolset(FunctionToolset([crash]), effects)
    with pytest.raises(EffectInDoubtError):
        await PydanticAgent(TestModel(), toolsets=[toolset]).run("go")
    checked = OnceToolset(FunctionToolset([crash]), effects, check=lambda intent: "was sent")
    result = await PydanticAgent(TestModel(), toolsets=[checked]).run("go")
    assert "was sent" in result.output


@pytest.mark.parametrize("framework", ["openai-agents", "pydantic-ai"])
async def test_a_turn_killed_mid_turn_and_run_again_never_repeats_a_recorded_call(
    framework: str, tmp_path: Path
) -> None:
    db, counter = str(tmp_path / "s.db"), tmp_path / "counter"
    args = [framework, db, str(counter)]
    async with ForkServer(WORKERS / "framework_turn.py", *args) as server:
        cut = 0  # runs killed after a tool ran, before the turn ended
        for _ in range(KILLS):
            run = await killed_run(server, args, 0.04, after="tool")  # before its outcome
            cut += not {"end", "doubt"} & set(run)
            if not any(line.startswith("tool") for line in run):
                break  # every call is recorded: nothing runs any more
        printed = await killed_run(server, args, None)
    assert cut >= 1, "no kill fell in the turn"
    # Each call ran exactly once: never again once recorded, and those a
    # kill left in doubt were settled by the check, never run twice.
    assert printed[-1] == "end"
    ran = collections.Counter(counter.read_text().split())
    assert ran == dict.fromkeys(CALLS[framework], 1)
    async with open_store(db) as store:
        states = {state.key: state.state for state in await store.journal("agent").effects.read()}
    assert set(states.values()) == {"done"}
    assert len(states) == len(CALLS[framework])
