"""Values nested deeper than the wire allows, through every adapter: an
`InvalidRecordError` naming the session and the limit, nothing stored,
never a `RecursionError` (however deep: past Python's recursion limit too).
Without the frameworks these tests skip (fail under CI=true): `require`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integrations import require

require("agents", extra="openai-agents")
require("langchain_core", extra="langchain")
require("pydantic_ai", extra="pydantic-ai")

from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai.messages import ModelResponse, ToolCallPart

from sessionstore import InvalidRecordError, SessionMeta, SessionStore
from sessionstore.integrations.langchain import SessionStoreChatMessageHistory
from sessionstore.integrations.openai_agents import StoreSession
from sessionstore.integrations.pydantic_ai import save_messages

pytestmark = pytest.mark.asyncio

DEPTHS = [200, 1_500, 100_000]


def deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", DEPTHS)
async def test_openai_agents_items_too_deep_are_refused_naming_the_session(
    async_store: SessionStore, depth: int
) -> None:
    session = StoreSession(async_store, "chat")
    items: list[Any] = [
        {"role": "user", "content": deep(depth)},
        {"type": "function_call_output", "call_id": "c", "output": deep(depth)},
    ]
    for n, item in enumerate(items):  # the first add (before the session exists), then one after
        with pytest.raises(InvalidRecordError, match=r"session .*deeper than 127 levels"):
            await session.add_items([item])
        # Texts of their own: the same unanswered input again is a resumed turn, stored once.
        await session.add_items([{"role": "user", "content": f"hi {n}"}])
    assert len(await StoreSession(async_store, "chat").get_items()) == 2


@pytest.mark.parametrize("depth", DEPTHS)
async def test_langchain_messages_too_deep_are_refused_naming_the_session(
    async_store: SessionStore, depth: int
) -> None:
    history = SessionStoreChatMessageHistory(async_store, "chat")
    messages = [
        HumanMessage(content=[{"type": "text", "text": "x", "x": deep(depth)}]),
        AIMessage(content="x", additional_kwargs={"x": deep(depth)}),
    ]
    for message in messages:
        with pytest.raises(InvalidRecordError, match=r"session .*deeper than 127 levels"):
            await history.aadd_messages([message])
    assert await history.aget_messages() == []


@pytest.mark.parametrize("depth", DEPTHS)
async def test_pydantic_ai_messages_too_deep_are_refused_naming_the_session(
    async_store: SessionStore, depth: int
) -> None:
    await async_store.create(SessionMeta(id="run-1"))
    response = ModelResponse(parts=[ToolCallPart(tool_name="t", args={"x": deep(depth)})])
    with pytest.raises(InvalidRecordError, match=r"session 'run-1'.*deeper than 127 levels"):
        await save_messages(async_store, "run-1", [response])
    assert await async_store.load("run-1") == []
