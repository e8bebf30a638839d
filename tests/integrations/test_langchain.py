"""The LangChain chat history: a real chain over a fake chat model, and every
kind of LangChain message through a real store."""

from __future__ import annotations

import asyncio
import math
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integrations import call, require

require("langchain_core", extra="langchain")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from sessionstore import (
    CompactionEntry,
    ConfigurationError,
    InvalidRecordError,
    InvalidSessionIdError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionStore,
    open_store,
)
from sessionstore.integrations.langchain import (
    SessionStoreChatMessageHistory,
    from_context,
    to_message,
)
from sessionstore.sync import SyncStore
from sessionstore.sync import open_store as open_sync_store
from tests.cli.helpers import run
from tests.kinds import StoreTargets

CONVERSATION = "chat-1"
SUMMARY = "[Conversation summary]\n"

# What LangChain makes: every message class, tool calls valid and not,
# content blocks, metadata, ids and names.
EVERY_KIND: list[BaseMessage] = [
    SystemMessage("You answer weather questions.", id="s1"),
    SystemMessage("Be brief.", additional_kwargs={"__openai_role__": "developer"}),
    HumanMessage("Weather in Lisbon?", name="ana", id="h1"),
    HumanMessage(
        [
            {"type": "text", "text": "And here?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]
    ),
    AIMessage(
        "",
        tool_calls=[
            {"name": "weather", "args": {"city": "Lisbon", "days": 2}, "id": "c1"},
            {"name": "weather", "args": {"city": "Porto", "units": None}, "id": "c2"},
        ],
        invalid_tool_calls=[
            {"name": "weather", "args": "{oops", "id": "c3", "error": "bad JSON"},
        ],
        usage_metadata={"input_tokens": 12, "output_tokens": 9, "total_tokens": 21},
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
        id="run-1",
    ),
    ToolMessage("sunny", tool_call_id="c1", artifact={"raw": [1, 2.5]}, status="success"),
    ToolMessage("failed", tool_call_id="c2", name="weather", status="error"),
    AIMessage("Sunny in Lisbon.", response_metadata={"temperature": 0.25}),
    ChatMessage(role="critic", content="Too short."),
    FunctionMessage(name="weather", content="{'sky': 'clear'}"),
    AIMessageChunk(content="partial", id="chunk-1"),
]


# ---------------------------------------------------------------- a real chain


@dataclass
class Chat:
    """A chain with memory, asked through ``invoke`` (in a thread, as plain
    sync code) or ``ainvoke``; ``seen`` has what the model got, call by call."""

    store: SessionStore | SyncStore
    blocking: bool
    seen: list[list[BaseMessage]] = field(default_factory=list)

    def __post_init__(self) -> None:
        def record(messages: list[BaseMessage]) -> list[BaseMessage]:
            self.seen.append(list(messages))
            return messages

        model = FakeListChatModel(responses=[f"answer {n}" for n in range(1, 10)])
        self.chain = RunnableWithMessageHistory(
            RunnableLambda(record) | model,
            lambda session_id: SessionStoreChatMessageHistory(self.store, session_id),
        )

    def history(self) -> SessionStoreChatMessageHistory:
        return SessionStoreChatMessageHistory(self.store, CONVERSATION)

    async def ask(self, text: str) -> None:
        config: RunnableConfig = {"configurable": {"session_id": CONVERSATION}}
        if self.blocking:
            await asyncio.to_thread(self.chain.invoke, text, config)
        else:
            await self.chain.ainvoke(text, config)

    async def clear(self) -> None:
        if self.blocking:
            await asyncio.to_thread(self.history().clear)
        else:
            await self.history().aclear()


def said(messages: Sequence[BaseMessage]) -> list[tuple[str, object]]:
    return [(message.type, message.content) for message in messages]


@pytest.fixture(
    params=[("sync", True), ("sync", False), ("async", False)],
    ids=["sync-store-invoke", "sync-store-ainvoke", "async-store-ainvoke"],
)
async def chat(
    request: pytest.FixtureRequest, kind: str, store_targets: StoreTargets
) -> AsyncIterator[Chat]:
    facade, blocking = request.param
    target = store_targets.new(kind)
    if facade == "sync":
        with open_sync_store(target) as blocking_store:
            yield Chat(blocking_store, blocking)
    else:
        async with open_store(target) as store:
            yield Chat(store, blocking)


pytestmark = pytest.mark.filterwarnings(
    # LangChain deprecates the chain in favour of LangGraph; it is still what
    # BaseChatMessageHistory is for.
    "ignore:RunnableWithMessageHistory is deprecated"
)


async def test_the_second_turn_sees_the_first(chat: Chat) -> None:
    await chat.ask("I am Ana.")
    await chat.ask("What is my name?")
    assert said(chat.seen[1]) == [
        ("human", "I am Ana."),
        ("ai", "answer 1"),
        ("human", "What is my name?"),
    ]


async def test_after_a_compaction_the_chain_sees_its_summary_then_what_it_kept(
    chat: Chat,
) -> None:
    await chat.ask("I am Ana.")
    await chat.ask("I live in Lisbon.")
    session = await call(chat.store, "head", CONVERSATION)
    entries = await call(chat.store, "load", session)
    marker = CompactionEntry.new("Ana introduced herself.", first_kept_id=entries[2].id)
    await call(chat.store, "append", session, marker)

    await chat.ask("Where do I live?")
    assert said(chat.seen[2]) == [
        ("human", SUMMARY + "Ana introduced herself."),
        ("human", "I live in Lisbon."),
        ("ai", "answer 2"),
        ("human", "Where do I live?"),
    ]
    # The turn was stored after the marker; the history reads as the chain saw it.
    assert said(await chat.history().aget_messages()) == [
        *said(chat.seen[2]),
        ("ai", "answer 3"),
    ]


async def test_clear_branches_and_the_chain_starts_over(chat: Chat) -> None:
    await chat.ask("I am Ana.")
    old = await call(chat.store, "head", CONVERSATION)
    await chat.clear()
    await chat.ask("Who am I?")

    assert said(chat.seen[1]) == [("human", "Who am I?")]
    new = await call(chat.store, "head", CONVERSATION)
    (meta,) = [m for m in await call(chat.store, "list") if m.id == new]
    assert meta.parent_session == old
    assert len(await call(chat.store, "load", old)) == 2  # nothing was deleted
    assert [move.session_id for move in await call(chat.store, "head_history", CONVERSATION)] == [
        old,
        new,
    ]
    assert await call(chat.store, "integrity") == []


async def test_a_conversation_is_named_as_openai_agents_names_it(chat: Chat) -> None:
    # The head and the first session both bear the conversation's name, so
    # `sessionstore show chat-1` finds it by the name LangChain knows it by.
    await chat.ask("I am Ana.")
    assert await call(chat.store, "head", CONVERSATION) == CONVERSATION
    assert len(await call(chat.store, "load", CONVERSATION)) == 2


async def test_a_conversation_begun_under_the_derived_id_is_continued(
    async_store: SessionStore,
) -> None:
    # As the earlier naming left it: the head names a session whose id was
    # derived from the conversation's name.
    derived = str(uuid.uuid5(uuid.UUID("4f7c1a52-9d3e-4b8a-a6e1-2c5b0d9e7f31"), CONVERSATION))
    await async_store.create(SessionMeta.new().model_copy(update={"id": derived}))
    await async_store.set_head(CONVERSATION, derived)
    await async_store.append_many(
        derived, [MessageEntry.new(to_message(HumanMessage("I am Ana.")))]
    )

    history = SessionStoreChatMessageHistory(async_store, CONVERSATION)
    await history.aadd_messages([AIMessage("Hello, Ana.")])

    assert said(await history.aget_messages()) == [("human", "I am Ana."), ("ai", "Hello, Ana.")]
    assert await async_store.head(CONVERSATION) == derived
    assert [meta.id for meta in await async_store.list()] == [derived]  # no second session


def test_sessionstore_show_finds_a_conversation_by_its_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "sessions.db")
    with open_sync_store(db) as store:
        SessionStoreChatMessageHistory(store, "ana").add_messages(
            [HumanMessage("I am Ana."), AIMessage("Hello, Ana.")]
        )
    status, out, err = run(capsys, "--db", db, "show", "ana")
    assert (status, err) == (0, "")
    assert [line.split("\t")[4] for line in out.splitlines()[1:]] == ["I am Ana.", "Hello, Ana."]


# ---------------------------------------------------------------- the history


async def test_every_kind_of_message_comes_back_equal(async_store: SessionStore) -> None:
    history = SessionStoreChatMessageHistory(async_store, CONVERSATION)
    await history.aadd_messages(EVERY_KIND)
    back = await history.aget_messages()
    assert back == EVERY_KIND
    assert [type(message) for message in back] == [type(message) for message in EVERY_KIND]


async def test_stored_messages_read_well_without_langchain(async_store: SessionStore) -> None:
    history = SessionStoreChatMessageHistory(async_store, CONVERSATION)
    await history.aadd_messages(EVERY_KIND)
    session = await async_store.head(CONVERSATION)
    assert session is not None
    stored = await async_store.load_context(session)
    assert [m.role for m in stored] == [
        "system", "system", "user", "user", "assistant", "tool", "tool", "assistant",
        "critic", "function", "assistant",
    ]  # fmt: skip
    assert stored[3].text() == "And here?"
    assert stored[4].extra["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Lisbon", "days": 2}'},
    }
    assert stored[5].extra["tool_call_id"] == "c1"
    assert stored[2].extra["name"] == "ana"


def test_a_compaction_summary_comes_back_as_a_human_message() -> None:
    summary = Message.user(SUMMARY + "Ana introduced herself.")
    assert from_context([summary]) == [HumanMessage(SUMMARY + "Ana introduced herself.")]


def test_messages_stored_by_other_code_are_mapped_by_role() -> None:
    call_ok = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    call_bad = {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{no"}}
    stored = [
        Message(role="system", content="rules"),
        Message(role="user", content=[{"type": "text", "text": "hi"}], name="ana"),
        Message(role="assistant", content="", tool_calls=[call_ok, call_bad]),
        Message(role="tool", content="done", tool_call_id="c1"),
        Message(role="narrator", content={"not": "langchain content"}),
    ]
    system, user, assistant, tool, other = from_context(stored)
    assert system == SystemMessage("rules")
    assert user == HumanMessage([{"type": "text", "text": "hi"}], name="ana")
    assert isinstance(assistant, AIMessage)
    assert assistant.tool_calls == [
        {"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}
    ]
    assert [(bad["id"], bad["args"]) for bad in assistant.invalid_tool_calls] == [("c2", "{no")]
    assert tool == ToolMessage("done", tool_call_id="c1")
    assert other == ChatMessage(role="narrator", content="")


async def test_a_batch_is_stored_all_or_none(async_store: SessionStore) -> None:
    history = SessionStoreChatMessageHistory(async_store, CONVERSATION)
    await history.aadd_messages([HumanMessage("kept")])
    unstorable = AIMessage("x", response_metadata={"score": math.nan})
    with pytest.raises(InvalidRecordError):
        await history.aadd_messages([HumanMessage("lost"), unstorable])
    assert await history.aget_messages() == [HumanMessage("kept")]


def test_a_new_conversation_reads_empty_and_writes_nothing(sync_store: SyncStore) -> None:
    history = SessionStoreChatMessageHistory(sync_store, CONVERSATION)
    assert history.messages == []
    history.clear()
    history.add_messages([])
    assert sync_store.list() == []
    assert sync_store.heads() == []


def test_histories_starting_one_conversation_at_once_share_its_session(
    sync_store: SyncStore,
) -> None:
    start = threading.Barrier(8)

    def say(n: int) -> None:
        history = SessionStoreChatMessageHistory(sync_store, CONVERSATION)
        start.wait()
        history.add_messages([HumanMessage(f"hello {n}")])

    threads = [threading.Thread(target=say, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    history = SessionStoreChatMessageHistory(sync_store, CONVERSATION)
    assert sorted(str(m.content) for m in history.messages) == [f"hello {n}" for n in range(8)]
    assert len(sync_store.list()) == 1


class ClearFirst:
    """A store on which another history clears the conversation just before
    the next ``append_many``: a clear landing in an add's race window."""

    def __init__(self, store: SessionStore, other: SessionStoreChatMessageHistory) -> None:
        self.store, self.other, self.armed = store, other, True

    def __getattr__(self, name: str) -> object:
        method = getattr(self.store, name)
        if name != "append_many" or not self.armed:
            return method

        async def clear_then(*args: object, **kwargs: object) -> object:
            self.armed = False
            await self.other.aclear()
            return await method(*args, **kwargs)

        return clear_then


async def test_a_clear_racing_an_add_leaves_the_add_on_the_new_session(
    async_store: SessionStore,
) -> None:
    other = SessionStoreChatMessageHistory(async_store, CONVERSATION)
    await other.aadd_messages([HumanMessage("before")])
    racing = ClearFirst(async_store, other)
    adder = SessionStoreChatMessageHistory(racing, CONVERSATION)  # type: ignore[call-overload]
    await adder.aadd_messages([HumanMessage("during"), AIMessage("reply")])
    assert [m.content for m in await other.aget_messages()] == ["during", "reply"]
    assert len(await async_store.head_history(CONVERSATION)) == 2


def test_histories_in_threads_adding_and_clearing_keep_each_add_whole_and_in_order(
    sync_store: SyncStore,
) -> None:
    start = threading.Barrier(6)

    def talk(n: int) -> None:
        history = SessionStoreChatMessageHistory(sync_store, CONVERSATION)
        start.wait()
        for turn in range(6):
            history.add_messages([HumanMessage(f"{n}-{turn}"), AIMessage(f"{n}-{turn}r")])
            if n == 0 and turn == 2:
                history.clear()

    threads = [threading.Thread(target=talk, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    history = SessionStoreChatMessageHistory(sync_store, CONVERSATION)
    texts = [str(m.content) for m in history.messages]
    for question, reply in zip(texts[::2], texts[1::2], strict=True):
        assert reply == question + "r"  # each add whole, never split by another
    for n in range(6):
        turns = [int(t.split("-")[1]) for t in texts[::2] if t.startswith(f"{n}-")]
        # Those before the clear are gone, those after it all kept, in order.
        assert turns == list(range(6 - len(turns), 6))
    assert [t for t in texts[::2] if t.startswith("0-")] == ["0-3", "0-4", "0-5"]


async def test_blocking_calls_on_an_async_store_say_what_to_use(async_store: SessionStore) -> None:
    history = SessionStoreChatMessageHistory(async_store, CONVERSATION)
    with pytest.raises(ConfigurationError, match=r"messages is a blocking call.*ainvoke"):
        _ = history.messages
    with pytest.raises(ConfigurationError, match="add_messages"):
        history.add_messages([HumanMessage("hi")])
    with pytest.raises(ConfigurationError, match="clear"):
        history.clear()


def test_a_conversation_name_follows_the_session_id_rule(sync_store: SyncStore) -> None:
    with pytest.raises(InvalidSessionIdError):
        SessionStoreChatMessageHistory(sync_store, "users/ana")


def test_to_message_keeps_content_once() -> None:
    stored = to_message(HumanMessage("hello"))
    assert stored.content == "hello"
    assert "content" not in stored.extra["langchain"]["data"]
