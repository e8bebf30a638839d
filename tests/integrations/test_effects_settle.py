"""A tool call left in doubt, through each framework: the run ends with the
`EffectInDoubtError` itself (never a framework's wrapper, never a tool
error told to the model), whose message holds the commands that settle it;
run as printed, they settle it, and the turn run again goes on
(docs/effects.md, "After a crash: resuming a turn")."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import require

require("agents", extra="openai-agents")
require("pydantic_ai", extra="pydantic-ai")
require("langchain_core", extra="langchain")

from agents import Agent, Runner, function_tool
from agents.exceptions import UserError
from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException, tool
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

from sessionstore import EffectFailedError, EffectInDoubtError, open_store
from sessionstore.integrations.langchain import OnceTool
from sessionstore.integrations.openai_agents import once_tool
from sessionstore.integrations.pydantic_ai import OnceToolset
from sessionstore.testing.effects_contract import Crash
from tests.cli.helpers import run
from tests.integrations.scripted import NO_TRACING, ScriptedModel, answer, calls


def settle_as_printed(
    capsys: pytest.CaptureFixture[str], error: EffectInDoubtError, outcome: str, **values: str
) -> str:
    """Run the settle command the error prints for ``outcome``, its
    placeholders (``JSON``, ``WHY``) filled in; return what it printed."""
    (line,) = [
        line
        for line in str(error).splitlines()
        if f"--settle {shlex.quote(error.intent.key)} {outcome} " in line
    ]
    words = [values.get(word, word) for word in shlex.split(line)]
    assert words[0] == "sessionstore"
    status, out, err = run(capsys, *words[1:])
    assert (status, err) == (0, "")
    return out


def test_an_openai_agents_call_in_doubt_ends_the_run_with_how_to_settle_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db, sent = str(tmp_path / "agents.db"), list[str]()

    @function_tool  # the default failure_error_function tells the model of a tool's errors
    def send(to: str) -> str:
        """Send a message."""
        if not sent:
            sent.append("killed")
            raise Crash  # the process dies while the tool runs
        sent.append(to)
        return f"sent to {to}"

    async def turn() -> Any:
        async with open_store(db) as store:
            model = ScriptedModel(calls(1), answer("Sent.", "msg_1"))
            tool = once_tool(send, store.journal("mailer").effects, session="chat-1")
            agent = Agent(name="a", instructions="Send.", model=model, tools=[tool])
            result = await Runner.run(agent, "go", run_config=NO_TRACING)
            return result.final_output, model.inputs

    with pytest.raises(Crash):
        asyncio.run(turn())
    with pytest.raises(EffectInDoubtError) as raised:
        asyncio.run(turn())
    assert not isinstance(raised.value, UserError)  # not the Runner's "Error running tool"
    assert raised.value.journal == "mailer"
    key = shlex.quote(raised.value.intent.key)
    assert f"sessionstore --db {db} journal mailer --settle {key} done" in str(raised.value)
    assert sent == ["killed"]  # never run again, and never reported to the model
    out = settle_as_printed(capsys, raised.value, "done", JSON='"sent to u1"', WHY="in the outbox")
    assert f"settled effect {raised.value.intent.key!r} (send) in journal mailer: done" in out
    final, inputs = asyncio.run(turn())
    assert final == "Sent."
    assert sent == ["killed"]  # the settled result, not a second send
    outputs = [item for item in inputs[-1] if item.get("type") == "function_call_output"]
    assert [item["output"] for item in outputs] == ["sent to u1"]


def test_a_pydantic_ai_call_in_doubt_settled_not_done_runs_on_the_next_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db, sent = str(tmp_path / "agents.db"), list[str]()

    def send(to: str) -> str:
        """Send a message."""
        if not sent:
            sent.append("killed")
            raise Crash
        sent.append(to)
        return f"sent to {to}"

    async def turn() -> str:
        async with open_store(db) as store:
            toolset = OnceToolset(FunctionToolset([send]), store.journal("mailer").effects)
            return (await PydanticAgent(TestModel(), toolsets=[toolset]).run("go")).output

    with pytest.raises(Crash):
        asyncio.run(turn())
    with pytest.raises(EffectInDoubtError) as raised:
        asyncio.run(turn())
    assert f"sessionstore --db {db} journal mailer --settle" in str(raised.value)
    out = settle_as_printed(capsys, raised.value, "not-done", WHY="not in the outbox")
    assert "its next run runs it" in out
    assert "sent to" in asyncio.run(turn())
    assert sent == ["killed", "a"]  # run once more, as settled


def test_a_langchain_call_in_doubt_is_never_made_a_tool_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db, sent = str(tmp_path / "agents.db"), list[str]()

    @tool
    def send(to: str) -> str:
        """Send a message."""
        if not sent:
            sent.append("killed")
            raise Crash
        raise ToolException("smtp down")

    send.handle_tool_error = True  # its own errors become a message for the model

    async def call() -> Any:
        async with open_store(db) as store:
            once = OnceTool(send, store.journal("mailer").effects, session="thread-1")
            return await once.ainvoke(
                {"type": "tool_call", "id": "c9", "name": "send", "args": {"to": "a"}}
            )

    with pytest.raises(Crash):
        asyncio.run(call())
    with pytest.raises(EffectInDoubtError) as raised:
        asyncio.run(call())
    key = shlex.quote(raised.value.intent.key)
    assert f"journal mailer --settle {key} failed --reason WHY" in str(raised.value)
    settle_as_printed(capsys, raised.value, "failed", WHY="bounced: no such mailbox")
    with pytest.raises(EffectFailedError, match=r"settled failed by .*: bounced: no such mailbox"):
        asyncio.run(call())
    assert sent == ["killed"]


def test_a_langchain_tool_call_settled_done_gives_back_a_tool_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "agents.db")

    @tool
    def send(to: str) -> str:
        """Send a message."""
        raise Crash

    async def call() -> Any:
        async with open_store(db) as store:
            once = OnceTool(send, store.journal("mailer").effects, session="thread-1")
            call = {"type": "tool_call", "id": "c9", "name": "send", "args": {"to": "a"}}
            return await once.ainvoke(call)

    with pytest.raises(Crash):
        asyncio.run(call())
    with pytest.raises(EffectInDoubtError) as raised:
        asyncio.run(call())
    settle_as_printed(capsys, raised.value, "done", JSON='{"id": "m-7"}', WHY="in the outbox")
    message = asyncio.run(call())
    assert isinstance(message, ToolMessage)  # what a ToolNode expects of a tool call
    assert (message.content, message.tool_call_id, message.name) == ('{"id": "m-7"}', "c9", "send")
