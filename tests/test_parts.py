"""What a stored message says (`sessionstore.parts`): each shape's tool call
and result read as one, whichever writer stored them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessionstore import MemoryStore, Message, SessionStore
from sessionstore.parts import Other, Said, ToolCall, ToolResult, read_message
from tests.dialects import FORECAST, WEATHER, require_frameworks, write_every_dialect

require_frameworks()

DIALECTS = ["openai", "anthropic", "openai-agents", "langchain", "pydantic-ai"]


@pytest.fixture
async def memory() -> AsyncIterator[SessionStore]:
    async with MemoryStore() as store:
        yield store


def arguments(call: ToolCall) -> Any:
    return json.loads(call.arguments) if isinstance(call.arguments, str) else call.arguments


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_every_writer_s_tool_call_and_result_read_alike(
    memory: SessionStore, dialect: str
) -> None:
    sessions = await write_every_dialect(memory)
    readings = [read_message(m) for m in await memory.load_context(sessions[dialect])]
    assert [r.label for r in readings] == ["user", "tool call", "tool result", "assistant"]
    (call,) = readings[1].pieces
    assert isinstance(call, ToolCall)
    assert (call.name, arguments(call)) == ("get_weather", WEATHER)
    (result,) = readings[2].pieces
    assert isinstance(result, ToolResult)
    assert result.call_id == call.call_id
    assert result.output == (Said(FORECAST),)
    assert result.status is None
    assert [p.text for p in readings[3].pieces if isinstance(p, Said)] == ["Sunny."]


def test_an_anthropic_error_result_and_text_beside_a_call() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "x"}}
    asked = read_message(Message(role="assistant", content=[{"type": "text", "text": "Hm."}, use]))
    assert asked.label == "assistant"  # it says something besides its call
    assert asked.pieces == (Said("Hm."), ToolCall("t1", "search", {"q": "x"}))
    failed = {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}
    (result,) = read_message(Message(role="user", content=[failed])).pieces
    assert result == ToolResult("t1", None, (Said("boom"),), "error")


def test_openai_agents_items_of_other_types_are_named_never_dropped() -> None:
    def item(fields: dict[str, Any]) -> Message:
        return Message(role=fields["type"], content=fields, openai_agents="item")

    thought = {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "Hm"}]}
    reading = read_message(item(thought))
    assert (reading.label, reading.pieces) == ("reasoning", (Said("Hm", {}),))
    shell = {"type": "local_shell_call", "call_id": "s1", "action": {"command": ["ls"]}}
    reading = read_message(item(shell))
    assert reading.label == "tool call"
    assert reading.pieces == (ToolCall("s1", "local_shell", {"command": ["ls"]}),)
    newer = {"type": "hologram_projection", "id": "h1"}
    reading = read_message(item(newer))
    assert reading.label == "hologram projection"
    assert reading.pieces == (Other(newer, "hologram_projection"),)


def test_a_message_s_other_fields_are_kept_for_the_views() -> None:
    reading = read_message(Message(role="user", content="hi", name="ann"))
    assert reading.fields == {"name": "ann"}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    reading = read_message(Message(role="assistant", content="", tool_calls=[call]))
    assert reading.fields == {}  # the calls are shown as pieces
