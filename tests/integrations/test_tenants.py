"""The adapters on a scoped store (`ScopedStore`): one owner's history,
session or run never reads nor writes another's, and works on its own.

Without LangChain, pydantic-ai or openai-agents these tests skip (fail
under CI=true): `require`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests.integrations import require

require("langchain_core", extra="langchain")
require("pydantic_ai", extra="pydantic-ai")
require("agents", extra="openai-agents")

from agents import Agent, RunContextWrapper, Runner, function_tool
from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.test import TestModel

from sessionstore import (
    ArchiveError,
    ArchiveReport,
    ConfigurationError,
    InvalidSessionIdError,
    ScopedStore,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    encode,
    import_archive,
)
from sessionstore.integrations.conversation import first_id
from sessionstore.integrations.langchain import SessionStoreChatMessageHistory
from sessionstore.integrations.openai_agents import StoreSession, once_tool
from sessionstore.integrations.pydantic_ai import (
    MessageHistories,
    load_history,
    load_history_sync,
    save_messages,
    save_messages_sync,
)
from sessionstore.sync import SyncStore
from tests.integrations.scripted import NO_TRACING, ScriptedModel, agent_on, answer, calls

CHAT = "chat"


async def owners_of_sessions(store: SessionStore) -> dict[str, str | None]:
    """Every session of the store under the views, and its owner."""
    return {meta.id: meta.owner for meta in await store.list()}


# ---------------------------------------------------------------- LangChain


async def test_two_owners_langchain_histories_of_one_name_stay_apart(
    async_store: SessionStore,
) -> None:
    alice = SessionStoreChatMessageHistory(ScopedStore(async_store, "alice"), CHAT)
    bob = SessionStoreChatMessageHistory(ScopedStore(async_store, "bob"), CHAT)
    await alice.aadd_messages([HumanMessage("alice's secret"), AIMessage("kept")])

    assert await bob.aget_messages() == []  # as a conversation never begun
    await bob.aadd_messages([HumanMessage("bob's own")])  # and it begins
    assert [m.content for m in await bob.aget_messages()] == ["bob's own"]
    assert [m.content for m in await alice.aget_messages()] == ["alice's secret", "kept"]
    owners = await owners_of_sessions(async_store)
    assert sorted(owners.values(), key=str) == ["alice", "bob"]


async def test_a_langchain_history_named_as_anothers_session_reads_and_writes_its_own(
    async_store: SessionStore,
) -> None:
    alices_view = ScopedStore(async_store, "alice")
    alice = SessionStoreChatMessageHistory(alices_view, CHAT)
    await alice.aadd_messages([HumanMessage("alice's secret")])
    alices = first_id(alices_view, CHAT)
    assert await async_store.head(alices_view.prefix + CHAT) == alices

    # bob names his conversation as alice's session is named in the store.
    bob = SessionStoreChatMessageHistory(ScopedStore(async_store, "bob"), alices)
    assert await bob.aget_messages() == []
    await bob.aadd_messages([HumanMessage("bob's own")])
    assert [m.content for m in await alice.aget_messages()] == ["alice's secret"]
    assert len(await async_store.load(alices)) == 1


async def test_no_owner_can_take_the_first_id_of_anothers_conversation(
    async_store: SessionStore, tmp_path: Path
) -> None:
    # The prefix is an unkeyed hash of the owner: anyone can compute it.
    alices_view, bobs_view = ScopedStore(async_store, "alice"), ScopedStore(async_store, "bob")
    alice = SessionStoreChatMessageHistory(alices_view, "taxes")
    await alice.aadd_messages([HumanMessage("alice's secret")])
    archive = tmp_path / "bobs"
    (archive / "sessions").mkdir(parents=True)
    for name in ("taxes", CHAT):
        squat = SessionMeta(id=first_id(alices_view, name), owner="bob")
        (archive / "sessions" / f"{squat.id}.jsonl").write_text(encode(squat) + "\n")
    with pytest.raises(ArchiveError) as refused:
        await import_archive(bobs_view, archive)
    report = refused.value.report
    assert isinstance(report, ArchiveReport)
    reasons = {issue.reason.replace(Path(issue.file).stem, "<id>") for issue in report.refused}
    assert len(report.refused) == 2
    assert len(reasons) == 1  # the same for "taxes", which alice holds, and "chat"
    assert "reserved" in reasons.pop()
    for name in ("taxes", CHAT):
        with pytest.raises(InvalidSessionIdError, match="reserved"):
            await bobs_view.create(SessionMeta(id=first_id(alices_view, name)))
    await SessionStoreChatMessageHistory(alices_view, CHAT).aadd_messages([HumanMessage("hi")])
    assert await owners_of_sessions(async_store) == {
        first_id(alices_view, "taxes"): "alice",
        first_id(alices_view, CHAT): "alice",
    }


async def test_an_id_taken_first_outside_views_leaves_the_conversation_unable_to_begin(
    async_store: SessionStore,
) -> None:
    # Why code around views must leave such ids to them (docs/stores.md, The threat model).
    bobs_view = ScopedStore(async_store, "bob")
    taken = SessionMeta(id=first_id(bobs_view, CHAT), owner="alice")
    await async_store.create(taken)
    bob = SessionStoreChatMessageHistory(bobs_view, CHAT)
    with pytest.raises(SessionNotFoundError):
        await bob.aadd_messages([HumanMessage("bob's own")])
    assert len(await async_store.load(taken.id)) == 0  # alice's session, untouched


def test_a_blocking_langchain_history_on_a_scoped_store(sync_store: SyncStore) -> None:
    alice = SessionStoreChatMessageHistory(sync_store.scoped("alice"), CHAT)
    bob = SessionStoreChatMessageHistory(sync_store.scoped("bob"), CHAT)
    alice.add_messages([HumanMessage("alice's secret")])

    assert bob.messages == []
    bob.add_messages([HumanMessage("bob's own")])
    bob.clear()  # a new empty session of bob's
    bob.add_messages([HumanMessage("bob again")])
    assert [m.content for m in bob.messages] == ["bob again"]
    assert [m.content for m in alice.messages] == ["alice's secret"]
    assert {meta.owner for meta in sync_store.list()} == {"alice", "bob"}


def test_a_conversation_name_too_long_for_the_owners_prefix_is_refused(
    sync_store: SyncStore,
) -> None:
    view = sync_store.scoped("alice")
    longest = "c" * 200  # the longest session id
    history = SessionStoreChatMessageHistory(view, longest)
    with pytest.raises(InvalidSessionIdError, match="scoped store"):
        history.add_messages([HumanMessage("hi")])
    assert sync_store.list() == []


# ---------------------------------------------------------------- pydantic-ai


async def test_a_pydantic_ai_history_on_bobs_view_finds_alices_session_nowhere(
    async_store: SessionStore,
) -> None:
    alices = await ScopedStore(async_store, "alice").create(SessionMeta.new())
    run = await PydanticAgent(TestModel(custom_output_text="ok")).run("alice's secret")
    await save_messages(async_store, alices, run.new_messages())
    bob = ScopedStore(async_store, "bob")
    never = SessionMeta.new().id

    for session_id in (alices, never):  # the same answer for both
        with pytest.raises(SessionNotFoundError) as refused:
            await load_history(bob, session_id)
        assert str(refused.value) == str(SessionNotFoundError(session_id))
        with pytest.raises(SessionNotFoundError):
            await MessageHistories(bob).load(session_id)
        with pytest.raises(SessionNotFoundError):
            await save_messages(bob, session_id, run.new_messages())
    assert await load_history(async_store, alices) == run.all_messages()


async def test_a_pydantic_ai_run_on_bobs_view_keeps_his_history(
    async_store: SessionStore,
) -> None:
    bob = ScopedStore(async_store, "bob")
    histories = MessageHistories(bob)
    session = await bob.create(SessionMeta.new())
    agent = PydanticAgent(TestModel(custom_output_text="ok"))
    first = await agent.run("one", message_history=await histories.load(session))
    await histories.save(session, first.new_messages())
    second = await agent.run("two", message_history=await histories.load(session))
    await histories.save(session, second.new_messages())

    assert await histories.load(session) == second.all_messages()
    assert await owners_of_sessions(async_store) == {session: "bob"}


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
def test_pydantic_ai_blocking_helpers_on_a_scoped_store(sync_store: SyncStore) -> None:
    alice, bob = sync_store.scoped("alice"), sync_store.scoped("bob")
    alices = alice.create(SessionMeta.new())
    run = PydanticAgent(TestModel(custom_output_text="ok")).run_sync("alice's secret")
    save_messages_sync(alice, alices, run.new_messages())

    with pytest.raises(SessionNotFoundError):
        load_history_sync(bob, alices)
    with pytest.raises(SessionNotFoundError):
        save_messages_sync(bob, alices, run.new_messages())
    assert load_history_sync(alice, alices) == run.all_messages()


# ---------------------------------------------------------------- openai-agents


@dataclass
class Request:
    """What a server passes as the run's context: who the run is for."""

    user_id: str


def by_user(run: RunContextWrapper[Any]) -> str:
    return cast(Request, run.context).user_id


def said(items: list[Any]) -> list[str]:
    """The text of each message item, in order."""
    return [
        item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
        for item in items
        if "role" in item
    ]


async def test_each_users_run_on_one_session_lands_in_that_users_own_scope(
    async_store: SessionStore,
) -> None:
    model = ScriptedModel(
        answer("Hello alice.", "msg_1"), answer("Hello bob.", "msg_2"), answer("Yes.", "msg_3")
    )
    session = StoreSession(async_store, CHAT, tenant=by_user)

    async def turn(user: str, text: str) -> None:
        await Runner.run(
            agent_on(model), text, session=session, context=Request(user), run_config=NO_TRACING
        )

    await turn("alice", "I am alice, my secret is 42.")
    await turn("bob", "I am bob.")
    await turn("alice", "Still there?")
    # Each model call got its user's conversation, and only that.
    assert said(model.inputs[1]) == ["I am bob."]
    assert said(model.inputs[2]) == ["I am alice, my secret is 42.", "Hello alice.", "Still there?"]

    bob = StoreSession(ScopedStore(async_store, "bob"), CHAT)
    assert said(await bob.get_items()) == ["I am bob.", "Hello bob."]
    owners = await owners_of_sessions(async_store)
    assert sorted(owners.values(), key=str) == ["alice", "bob"]
    assert await async_store.head(CHAT) is None  # nothing outside the owners' scopes


async def test_a_routed_session_called_without_a_run_context_is_refused(
    async_store: SessionStore,
) -> None:
    session = StoreSession(async_store, CHAT, tenant=by_user)
    alice = RunContextWrapper(Request("alice"))
    await session.add_items([{"role": "user", "content": "hi"}], wrapper=alice)

    with pytest.raises(ConfigurationError, match="wrapper="):
        await session.get_items()
    with pytest.raises(ConfigurationError, match="tenant"):
        await session.add_items([{"role": "user", "content": "whose?"}])
    assert said(await session.get_items(wrapper=alice)) == ["hi"]
    assert said(await session.get_items(wrapper=RunContextWrapper(Request("bob")))) == []
    assert await session.pop_item(wrapper=alice) == {"role": "user", "content": "hi"}
    await session.clear_session(wrapper=alice)
    assert await session.current_session(wrapper=RunContextWrapper(Request("carol"))) is None


def test_a_session_name_too_long_for_a_view_is_refused_when_made(
    sync_store: SyncStore,
) -> None:
    store = sync_store.store
    longest = "c" * (200 - ScopedStore.PREFIX_BYTES)
    assert len(ScopedStore(store, "alice").prefix) == ScopedStore.PREFIX_BYTES
    for name in ("c" * 180, longest + "c"):
        with pytest.raises(InvalidSessionIdError, match="scoped store's prefix of 31 bytes"):
            StoreSession(store, name, tenant=by_user)
        with pytest.raises(InvalidSessionIdError, match="scoped store's prefix of 31 bytes"):
            StoreSession(ScopedStore(store, "alice"), name)
    StoreSession(store, "c" * 180)  # no view: the whole id is the name's
    assert StoreSession(store, longest, tenant=by_user).session_id == longest
    assert StoreSession(ScopedStore(store, "alice"), longest).session_id == longest


def test_a_tenant_that_is_not_a_function_is_refused() -> None:
    with pytest.raises(TypeError, match=r"run\.context\.user_id"):
        StoreSession("chat", ":memory:", tenant="alice")  # type: ignore[call-overload]


async def test_a_session_on_bobs_view_named_as_alices_session_sees_none_of_it(
    async_store: SessionStore,
) -> None:
    alices_view = ScopedStore(async_store, "alice")
    await StoreSession(alices_view, CHAT).add_items([{"role": "user", "content": "secret"}])
    alices = first_id(alices_view, CHAT)

    bob = StoreSession(ScopedStore(async_store, "bob"), alices)
    assert await bob.get_items() == []
    assert await bob.pop_item() is None
    await bob.add_items([{"role": "user", "content": "bob's own"}])
    assert said(await bob.get_items()) == ["bob's own"]
    assert said(await StoreSession(alices_view, CHAT).get_items()) == ["secret"]


async def test_once_tool_on_a_routed_session_keys_each_users_calls_apart(
    async_store: SessionStore,
) -> None:
    sent: list[str] = []

    @function_tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    session = StoreSession(async_store, CHAT, tenant=by_user)
    effects = async_store.journal("tools").effects
    tool = once_tool(send, effects, session=session)
    for user in ("alice", "bob"):  # the same call id, the same arguments
        model = ScriptedModel(calls(1), answer("Sent.", "msg_1"))
        agent = Agent(name="a", instructions="Send.", model=model, tools=[tool])
        await Runner.run(
            agent, "send it", session=session, context=Request(user), run_config=NO_TRACING
        )
    assert sent == ["u1", "u1"]  # bob's call was not taken for alice's
    assert len({state.key for state in await effects.read()}) == 2
