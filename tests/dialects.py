"""One tool exchange in each shape the store keeps, written as each writer
writes it: OpenAI Chat and Anthropic messages through the store API, and
openai-agents, LangChain and pydantic-ai through their adapters, driven by
the real frameworks (a scripted model each).

A test module using it calls `require_frameworks` first.
"""

from __future__ import annotations

from typing import Any

from sessionstore import Message, MessageEntry, SessionMeta, SessionStore
from tests.integrations import require

WEATHER = {"city": "Lisbon"}
"""What every exchange asks its tool."""
FORECAST = "sunny, 24 C"
"""What every tool answers."""


def require_frameworks() -> None:
    """Skip the calling module without the frameworks (fail it under CI=true)."""
    require("agents", extra="openai-agents")
    require("langchain_core", extra="langchain")
    require("pydantic_ai", extra="pydantic-ai")


async def write_every_dialect(store: SessionStore) -> dict[str, str]:
    """Each shape's session, by shape: a question, a ``get_weather`` call with
    `WEATHER`, its result `FORECAST`, and an answer. Returns the session ids."""
    return {
        "openai": await _openai(store),
        "anthropic": await _anthropic(store),
        "openai-agents": await _openai_agents(store),
        "langchain": await _langchain(store),
        "pydantic-ai": await _pydantic_ai(store),
    }


async def _by_hand(store: SessionStore, session_id: str, messages: list[Message]) -> str:
    await store.create(SessionMeta(id=session_id))
    await store.append_many(session_id, [MessageEntry.new(message) for message in messages])
    return session_id


async def _openai(store: SessionStore) -> str:
    function = {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}
    return await _by_hand(
        store,
        "openai-chat",
        [
            Message.user("Weather in Lisbon?"),
            Message(
                role="assistant",
                content="",
                tool_calls=[{"id": "call_1", "type": "function", "function": function}],
            ),
            Message(role="tool", content=FORECAST, tool_call_id="call_1"),
            Message.assistant("Sunny."),
        ],
    )


async def _anthropic(store: SessionStore) -> str:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": WEATHER}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": FORECAST}
    return await _by_hand(
        store,
        "anthropic",
        [
            Message.user("Weather in Lisbon?"),
            Message(role="assistant", content=[use]),
            Message(role="user", content=[result]),
            Message.assistant("Sunny."),
        ],
    )


async def _openai_agents(store: SessionStore) -> str:
    from agents import Agent, RunConfig, Runner, Usage, function_tool
    from agents.items import ModelResponse, TResponseOutputItem
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from sessionstore.integrations.openai_agents import StoreSession

    said = ResponseOutputText(text="Sunny.", type="output_text", annotations=[], logprobs=[])
    script: list[list[TResponseOutputItem]] = [
        [
            ResponseFunctionToolCall(
                id="fc_1",
                call_id="call_a1",
                type="function_call",
                name="get_weather",
                arguments='{"city": "Lisbon"}',
            )
        ],
        [
            ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed", content=[said]
            )
        ],
    ]

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=script.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return FORECAST

    agent = Agent(name="forecaster", model=Scripted(), tools=[get_weather])
    session = StoreSession(store, "agents-chat")
    await Runner.run(
        agent, "Weather in Lisbon?", session=session, run_config=RunConfig(tracing_disabled=True)
    )
    return await _current(store, "agents-chat")


async def _langchain(store: SessionStore) -> str:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from sessionstore.integrations.langchain import SessionStoreChatMessageHistory

    history = SessionStoreChatMessageHistory(store, "langchain-chat")
    call = {"name": "get_weather", "args": WEATHER, "id": "lc_1"}
    await history.aadd_messages(
        [
            HumanMessage("Weather in Lisbon?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage(FORECAST, tool_call_id="lc_1", name="get_weather"),
            AIMessage("Sunny."),
        ]
    )
    return await _current(store, "langchain-chat")


async def _pydantic_ai(store: SessionStore) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from sessionstore.integrations.pydantic_ai import save_messages

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_weather", WEATHER, tool_call_id="pa_1")])
        return ModelResponse(parts=[TextPart("Sunny.")])

    agent = Agent(FunctionModel(model), instructions="Forecast.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return FORECAST

    session_id = await store.create(SessionMeta(id="pydantic-ai"))
    result = await agent.run("Weather in Lisbon?")
    await save_messages(store, session_id, result.new_messages())
    return session_id


async def _current(store: SessionStore, name: str) -> str:
    """The session a conversation's head names."""
    session_id = await store.head(name)
    assert session_id is not None, name
    return session_id
