"""A tool's effect runs once when a crashed turn is run again on a model that,
as a live one does, answers each ask with new tool-call ids, for each
framework (tests/workers/live_turn.py; docs/effects.md "Through a
framework's tools"): every effect ran exactly once, the turn's input is
stored once, and the conversation ends as one uninterrupted turn leaves it.
A turn is cut in process here (an exception no handler catches, just after
an effect), and by SIGKILL in a forked worker at random moments in the
kill test at the end."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WORKERS, ForkServer, killed_run
from tests.integrations import require

require("agents", extra="openai-agents")
require("pydantic_ai", extra="pydantic-ai")
require("langchain_core", extra="langchain")

from agents import function_tool
from agents.tool_context import ToolContext
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from sessionstore import EffectInDoubtError, Message, MessageEntry, SessionStore, open_store
from sessionstore.integrations.langchain import (
    ChatHistories,
    OnceTool,
    SessionStoreChatMessageHistory,
)
from sessionstore.integrations.openai_agents import StoreSession, continue_turn, once_tool
from sessionstore.sync import SyncStore
from tests.kinds import StoreTargets
from tests.workers.live_turn import CHAT, EFFECTS, TURNS, World

FRAMEWORKS = list(TURNS)
KILLS = 3  # runs killed per case, each just after an effect
IDS = frozenset({"id", "call_id", "tool_call_id", "run_id", "conversation_id"})


class Crash(BaseException):
    """A process dying: no handler of the frameworks catches it."""


def crash_after(effects: int) -> Any:
    def after(made: int) -> None:
        if made == effects:
            raise Crash

    return after


async def conversation(store: SessionStore) -> list[Message]:
    """The messages of the conversation's current session."""
    current = await store.head(CHAT) or CHAT
    return [entry.message for entry in await store.load(current) if isinstance(entry, MessageEntry)]


TIMES = frozenset({"timestamp", "request_timestamp", "duration"})
"""Fields of a message that say when, or how long (pydantic-ai 2.7x's model
responses carry the time of their request and its duration too)."""


def same_up_to_ids(messages: list[Message]) -> Any:
    """``messages`` with each id (of a call, a message, a run) named by the
    order it first shows in, and no time: what two runs of a turn share."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items() if k not in TIMES}
        if isinstance(value, list):
            return [walk(item) for item in value]
        if key in IDS and isinstance(value, str):
            return names.setdefault(value, f"id{len(names)}")
        return value

    return walk([message.model_dump() for message in messages])


async def one_turn(framework: str, tmp_path: Path) -> Any:
    """What one uninterrupted turn stores."""
    async with open_store("memory://") as store:
        await TURNS[framework](store, World(str(tmp_path / "uncut")))
        return same_up_to_ids(await conversation(store))


async def answered(target: str) -> bool:
    """Whether the conversation's turn is answered: what tells a caller
    whether to run a turn again."""
    async with open_store(target) as store:
        stored = await conversation(store)
    return (
        bool(stored) and stored[-1].role == "assistant" and not stored[-1].extra.get("tool_calls")
    )


def users(messages: list[Message]) -> list[Any]:
    return [message.content for message in messages if message.role == "user"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
async def test_a_turn_cut_after_effects_and_run_again_runs_each_effect_once(
    framework: str, async_store: SessionStore, tmp_path: Path
) -> None:
    world = tmp_path / "world"
    # Cut after the 2nd effect (a step half done), then after the 2nd of the
    # rerun (in another step), then run to the end: three asks of a model
    # that gives new call ids each time.
    for after in (crash_after(2), crash_after(2), None):
        try:
            await TURNS[framework](async_store, World(str(world), after))
        except Crash:
            continue
    assert World(str(world)).sent() == EFFECTS
    stored = await conversation(async_store)
    assert users(stored) == ["go"]  # the input, once
    assert same_up_to_ids(stored) == await one_turn(framework, tmp_path)
    states = await async_store.journal("agent").effects.read()
    assert [state.state for state in states] == ["done"] * EFFECTS.total()


async def test_openai_agents_input_sent_again_is_stored_once_and_answered_turns_take_it(
    async_store: SessionStore,
) -> None:
    session = StoreSession(async_store, CHAT)
    go: Any = {"role": "user", "content": "go"}
    call: Any = {"type": "function_call", "call_id": "c1", "name": "send", "arguments": "{}"}
    output: Any = {"type": "function_call_output", "call_id": "c1", "output": "sent"}
    answer: Any = {"role": "assistant", "content": "done"}
    stop: Any = {"role": "user", "content": "stop"}
    await session.add_items([go])
    await session.add_items([go])  # no answer yet: the same turn
    await session.add_items([call, output])
    await session.add_items([go])  # a rerun, after tool calls saved mid-turn
    assert await session.get_items() == [go, call, output]
    await session.add_items([stop])  # another input
    await session.add_items([answer])
    await session.add_items([go])  # answered: a new turn
    assert [item.get("content") for item in await session.get_items()] == [
        "go",
        None,
        None,
        "stop",
        "done",
        "go",
    ]


def test_continue_turn_gives_the_model_a_resumed_turn_once() -> None:
    go: Any = {"role": "user", "content": "go"}
    call: Any = {"type": "function_call", "call_id": "c1", "name": "send", "arguments": "{}"}
    output: Any = {"type": "function_call_output", "call_id": "c1", "output": "sent"}
    answer: Any = {"role": "assistant", "content": "done"}
    assert continue_turn([go, call, output], [go]) == [go, call, output]
    assert continue_turn([go], [go]) == [go]
    assert continue_turn([go, call, output, answer], [go]) == [go, call, output, answer, go]
    stop: Any = {"role": "user", "content": "stop"}
    assert continue_turn([go, call, output], [stop]) == [go, call, output, stop]
    assert continue_turn([], [go]) == [go]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgresql"])
async def test_a_turn_killed_after_effects_and_run_again_runs_each_effect_once(
    framework: str, kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    target, world = store_targets.new(kind), str(tmp_path / "world")
    args = [framework, target, world]
    async with ForkServer(WORKERS / "live_turn.py", framework) as server:
        cut = 0  # runs killed after an effect, before the turn was answered
        for _ in range(KILLS):
            await killed_run(server, args, random.uniform(0, 0.04), after="tool")
            if await answered(target):  # a kill after the answer: the turn is over
                break
            cut += 1
        else:
            assert (await killed_run(server, args, None))[-1] == "end"
    assert cut >= 1, "no kill fell in the turn"
    async with open_store(target) as store:
        stored = await conversation(store)
        states = await store.journal("agent").effects.read()
    assert users(stored) == ["go"]
    assert World(world).sent() == EFFECTS
    assert same_up_to_ids(stored) == await one_turn(framework, tmp_path)
    assert collections.Counter(state.state for state in states) == {"done": EFFECTS.total()}


async def test_the_same_input_sent_twice_at_once_is_one_turn(async_store: SessionStore) -> None:
    # Each add reads the conversation and appends only if it still ends
    # where it read: the second finds the first's input, unanswered.
    go: Any = {"role": "user", "content": "go"}
    first, second = StoreSession(async_store, CHAT), StoreSession(async_store, CHAT)
    await first.add_items([{"role": "assistant", "content": "hello"}])
    await asyncio.gather(first.add_items([go]), second.add_items([go]))
    assert await first.get_items() == [{"role": "assistant", "content": "hello"}, go]


def test_a_langchain_call_asked_again_with_a_new_id_gets_its_recorded_message(
    sync_store: SyncStore,
) -> None:
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    history = SessionStoreChatMessageHistory(sync_store, CHAT)
    history.add_messages([HumanMessage("mail ada")])
    effects = sync_store.journal("agent").effects
    first = OnceTool(send, effects, history=history).invoke(
        {"type": "tool_call", "id": "call_a", "name": "send", "args": {"to": "ada"}}
    )
    # The process died before the step was stored; the rerun's model asks
    # again, with another id, and another tool object (a new process).
    again = OnceTool(send, effects, history=history).invoke(
        {"type": "tool_call", "id": "call_b", "name": "send", "args": {"to": "ada"}}
    )
    assert sent == ["ada"]
    assert (first.tool_call_id, again.tool_call_id) == ("call_a", "call_b")
    assert again.content == first.content == "sent to ada"
    history.add_messages([HumanMessage("mail ada")])  # a rerun adds its input again
    assert [message.content for message in history.messages] == ["mail ada"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
async def test_the_same_calls_in_the_next_turn_are_effects_of_their_own(
    framework: str, async_store: SessionStore, tmp_path: Path
) -> None:
    world = World(str(tmp_path / "world"))
    await TURNS[framework](async_store, world)
    await TURNS[framework](async_store, world)  # "go" again, once answered: a new turn
    assert world.sent() == EFFECTS + EFFECTS
    assert users(await conversation(async_store)) == ["go", "go"]


async def test_an_openai_agents_call_asked_again_with_a_new_id_and_spacing_is_one_effect(
    async_store: SessionStore,
) -> None:
    sent: list[str] = []

    @function_tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    session = StoreSession(async_store, CHAT)
    await session.add_items([{"role": "user", "content": "mail ada"}])  # the turn's input
    results = []
    for call_id, arguments in (("call_a", '{"to": "ada"}'), ("call_b", '{ "to" : "ada" }')):
        # A new process each time: a new wrapper, the model asked again.
        tool = once_tool(send, async_store.journal("agent").effects, session=session)
        context = ToolContext(
            None, tool_name="send", tool_call_id=call_id, tool_arguments=arguments
        )
        results.append(await tool.on_invoke_tool(context, arguments))
    assert sent == ["ada"]
    assert results == ["sent to ada", "sent to ada"]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_a_langchain_turn_run_again_under_runnable_with_message_history_runs_once(
    sync_store: SyncStore,
) -> None:
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    def turn(messages: list[Any], config: RunnableConfig) -> AIMessage:
        # A model that calls send with a new id at each ask; the history is
        # stored only once the turn ends, and the first run dies before.
        once = OnceTool(send, sync_store.journal("agent").effects)
        call = {"type": "tool_call", "id": f"call_{len(sent)}_{random.random()}", "name": "send"}
        once.invoke({**call, "args": {"to": "ada"}}, config)
        if len(attempts) == 1:
            raise RuntimeError("the process died")
        return AIMessage("done")

    attempts: list[int] = []
    chain = RunnableWithMessageHistory(RunnableLambda(turn), ChatHistories(sync_store))
    for _ in range(2):
        attempts.append(1)
        with contextlib.suppress(RuntimeError):
            chain.invoke([HumanMessage("mail ada")], {"configurable": {"session_id": CHAT}})
    assert sent == ["ada"]
    history = SessionStoreChatMessageHistory(sync_store, CHAT)
    assert [message.content for message in history.messages] == ["mail ada", "done"]


@pytest.mark.parametrize("cut", ["in the tool", "before the outputs are stored"])
def test_a_langchain_loop_storing_each_step_runs_a_cut_call_once_when_asked_again(
    sync_store: SyncStore, cut: str
) -> None:
    # A hand-written loop that stores the model's tool calls before they
    # run, then their outputs: the crash leaves a stored call with no output.
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        if cut == "in the tool" and len(sent) == 1:
            raise Crash  # the mail went out; the process died before its outcome
        return f"sent to {to}"

    asks = iter(range(100))

    def model(messages: list[Any]) -> AIMessage:  # live: a new id at every ask
        if any(message.type == "tool" for message in messages):
            return AIMessage("done")
        call = {"name": "send", "args": {"to": "ada"}, "id": f"call_{next(asks)}"}
        return AIMessage("", tool_calls=[call])

    def turn() -> None:
        history = SessionStoreChatMessageHistory(sync_store, CHAT)
        once = OnceTool(send, sync_store.journal("agent").effects, history=history)
        history.add_messages([HumanMessage("mail ada")])
        while (answer := model(history.messages)).tool_calls:
            history.add_messages([answer])
            outputs = [once.invoke({**call, "type": "tool_call"}) for call in answer.tool_calls]
            if cut == "before the outputs are stored" and next(asks) == 1:
                raise Crash
            history.add_messages(outputs)
        history.add_messages([answer])

    with pytest.raises(Crash):
        turn()
    if cut == "in the tool":  # the cut call is in doubt: asked again, it says so
        with pytest.raises(EffectInDoubtError):
            turn()
    else:  # its outcome was recorded: asked again, it is given back
        turn()
        stored = SessionStoreChatMessageHistory(sync_store, CHAT).messages
        assert [m.type for m in stored] == ["human", "ai", "ai", "tool", "ai"]
        assert stored[-2].content == "sent to ada"
    assert sent == ["ada"]
