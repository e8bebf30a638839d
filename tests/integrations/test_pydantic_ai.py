"""pydantic-ai message history: real agent runs on a scripted model, through a
real store, and messages built by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integrations import require

require("pydantic_ai", extra="pydantic-ai")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from sessionstore import (
    CompactionEntry,
    InvalidRecordError,
    Message,
    SessionMeta,
    SessionStore,
)
from sessionstore.integrations.pydantic_ai import (
    from_context,
    load_history,
    load_history_sync,
    save_messages,
    save_messages_sync,
)
from sessionstore.sync import SyncStore

SUMMARY = "[Conversation summary]\n"


def prompts(messages: list[ModelMessage]) -> list[str]:
    """The text user prompts in a history, in order."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def parts(message: ModelMessage) -> list[tuple[type, str]]:
    """What each part of a message is, and what it says."""
    said: list[tuple[type, str]] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            said.append((ToolCallPart, f"{part.tool_name} {part.tool_call_id}"))
        elif isinstance(part, ToolReturnPart):
            said.append((ToolReturnPart, f"{part.tool_name} {part.tool_call_id}: {part.content}"))
        elif isinstance(part, SystemPromptPart | UserPromptPart | TextPart):
            said.append((type(part), str(part.content)))
    return said


def forecaster(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model: asks for the weather with no city (the tool asks for a
    retry), then for the last prompt's city, then answers with every prompt
    it was sent, so a test sees what history it got."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(isinstance(part, UserPromptPart) for part in last.parts):
        return ModelResponse(parts=[ToolCallPart("weather", {"city": ""}, tool_call_id="c1")])
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns and str(returns[0].content).startswith("Sunny"):
        return ModelResponse(
            parts=[TextPart(f"{returns[0].content}. Prompts: {' | '.join(prompts(messages))}")],
            usage=RequestUsage(input_tokens=20, output_tokens=7),
        )
    city = prompts(messages)[-1]
    # Arguments as a JSON string this time, as some providers send them.
    return ModelResponse(
        parts=[ToolCallPart("weather", f'{{"city": "{city}"}}', tool_call_id="c2")]
    )


def make_agent() -> Agent[None, str]:
    agent = Agent(
        FunctionModel(forecaster), system_prompt="You forecast.", instructions="Be brief."
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        if not city:
            raise ModelRetry("Name a city.")
        return f"Sunny in {city}"

    return agent


@pytest.fixture
async def session(async_store: SessionStore) -> str:
    return await async_store.create(SessionMeta.new())


async def ask(store: SessionStore, session_id: str, prompt: str) -> Any:
    """One run with the session's history; its new messages saved."""
    result = await make_agent().run(prompt, message_history=await load_history(store, session_id))
    await save_messages(store, session_id, result.new_messages())
    return result


# ---------------------------------------------------------------- agent runs


async def test_a_run_comes_back_equal(async_store: SessionStore, session: str) -> None:
    result = await ask(async_store, session, "Lisbon")
    kinds = {part.part_kind for message in result.all_messages() for part in message.parts}
    assert {"system-prompt", "user-prompt", "tool-call", "tool-return", "text"} <= kinds
    assert await load_history(async_store, session) == result.all_messages()


async def test_the_second_run_gets_the_first_runs_history(
    async_store: SessionStore, session: str
) -> None:
    await ask(async_store, session, "Lisbon")
    second = await ask(async_store, session, "Porto")
    assert second.output == "Sunny in Porto. Prompts: Lisbon | Porto"
    assert await load_history(async_store, session) == second.all_messages()


async def test_stored_messages_read_well_without_pydantic_ai(
    async_store: SessionStore, session: str
) -> None:
    await ask(async_store, session, "Lisbon")
    context = await async_store.load_context(session)
    # The prompt, a call with no city and its retry, the call again, its result, the answer.
    assert [m.role for m in context] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert context[0].text() == "Lisbon"
    assert context[1].extra["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":""}'},
        }
    ]
    assert context[4].text() == "Sunny in Lisbon"
    assert context[5].text() == "Sunny in Lisbon. Prompts: Lisbon"


async def test_feedback_on_the_output_reads_as_a_user_message(
    async_store: SessionStore, session: str
) -> None:
    def drafter(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("final" if len(messages) > 1 else "draft")])

    agent = Agent(FunctionModel(drafter))

    @agent.output_validator
    def no_drafts(output: str) -> str:
        if output == "draft":
            raise ModelRetry("No drafts.")
        return output

    result = await agent.run("Write.")
    await save_messages(async_store, session, result.new_messages())
    context = await async_store.load_context(session)
    assert [m.role for m in context] == ["user", "assistant", "user", "assistant"]
    assert "No drafts." in context[2].text()
    assert await load_history(async_store, session) == result.all_messages()


async def test_a_compaction_gives_its_summary_then_what_it_kept(
    async_store: SessionStore, session: str
) -> None:
    first = await ask(async_store, session, "Lisbon")
    second = await ask(async_store, session, "Porto")
    kept = (await async_store.load(session))[len(first.new_messages())]
    await async_store.append(session, CompactionEntry.new("Lisbon: sunny.", first_kept_id=kept.id))

    history = await load_history(async_store, session)
    assert parts(history[0]) == [(UserPromptPart, SUMMARY + "Lisbon: sunny.")]
    assert history[1:] == second.new_messages()
    third = await ask(async_store, session, "Faro")
    assert third.output == f"Sunny in Faro. Prompts: {SUMMARY}Lisbon: sunny. | Porto | Faro"


@pytest.fixture
def thread_loop() -> Iterator[None]:
    """An event loop for ``run_sync``, which runs on the thread's loop and
    leaves it open; closed after the test."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


@pytest.mark.usefixtures("thread_loop")
def test_the_sync_helpers_serve_run_sync(sync_store: SyncStore) -> None:
    session = sync_store.create(SessionMeta.new())
    for city in ["Lisbon", "Porto"]:
        history = load_history_sync(sync_store, session)
        result = make_agent().run_sync(city, message_history=history)
        save_messages_sync(sync_store, session, result.new_messages())
    assert result.output == "Sunny in Porto. Prompts: Lisbon | Porto"
    assert load_history_sync(sync_store, session) == result.all_messages()


# ---------------------------------------------------------------- by hand

BY_HAND: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("You look at pictures."),
            UserPromptPart(["What is this?", ImageUrl(url="https://example.com/cat.png")]),
        ],
        instructions="Be brief.",
    ),
    ModelResponse(
        parts=[
            ThinkingPart("Looks like a cat.", signature="sig"),
            TextPart("A cat, I think."),
            ToolCallPart("zoom", {"factor": 2.5, "area": [0, 0, 10, 10]}, tool_call_id="z1"),
        ],
        usage=RequestUsage(input_tokens=100, output_tokens=12),
        model_name="vision-1",
        provider_name="test",
        provider_details={"finish_reason": "tool_calls", "latency": 0.125},
    ),
    ModelRequest(
        parts=[
            ToolReturnPart("zoom", {"pixels": [[1, 2], [3, 4]], "ok": True}, tool_call_id="z1"),
        ]
    ),
    ModelResponse(parts=[TextPart("A cat.")]),
]


async def test_messages_built_by_hand_come_back_equal(
    async_store: SessionStore, session: str
) -> None:
    await save_messages(async_store, session, BY_HAND)
    assert await load_history(async_store, session) == BY_HAND


async def test_binary_content_comes_back_as_bytes(async_store: SessionStore, session: str) -> None:
    picture = BinaryContent(data=b"\x89PNG\r\n\x1a\n\x00\xff", media_type="image/png")
    await save_messages(async_store, session, [ModelRequest(parts=[UserPromptPart([picture])])])
    (request,) = await load_history(async_store, session)
    assert isinstance(request, ModelRequest)
    assert isinstance(request.parts[0], UserPromptPart)
    assert not isinstance(request.parts[0].content, str)
    (back,) = request.parts[0].content
    assert isinstance(back, BinaryContent)
    assert (back.data, back.media_type) == (picture.data, picture.media_type)


async def test_a_save_is_all_or_none(async_store: SessionStore, session: str) -> None:
    deep: Any = "bottom"
    for _ in range(200):  # deeper than the wire format nests
        deep = [deep]
    unstorable = ModelRequest(parts=[ToolReturnPart("dig", deep, tool_call_id="d1")])
    with pytest.raises(InvalidRecordError):
        await save_messages(async_store, session, [BY_HAND[0], unstorable])
    assert await load_history(async_store, session) == []


def test_messages_stored_by_other_code_are_mapped_by_role() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    system, user, response, result, other = from_context(
        [
            Message.system("You forecast."),
            Message(role="user", content=[{"type": "text", "text": "Lisbon?"}]),
            Message(role="assistant", content="Let me look.", tool_calls=[call]),
            Message(role="tool", content="sunny", tool_call_id="c1"),
            Message(role="narrator", content="Meanwhile..."),
        ]
    )
    assert parts(system) == [(SystemPromptPart, "You forecast.")]
    assert parts(user) == [(UserPromptPart, "Lisbon?")]
    assert parts(response) == [(TextPart, "Let me look."), (ToolCallPart, "weather c1")]
    assert parts(result) == [(ToolReturnPart, "weather c1: sunny")]
    assert parts(other) == [(UserPromptPart, "Meanwhile...")]
