"""What the adapters keep between reads (`sessionstore.integrations.kept`):
a read after a turn reads only what the turn added, and what it gives is
always what a new adapter object reading everything would give.
Without the frameworks these tests skip (fail under CI=true): `require`.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.integrations import require

require("agents", extra="openai-agents")
require("langchain_core", extra="langchain")
require("pydantic_ai", extra="pydantic-ai")

from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from sessionstore import (
    CompactionEntry,
    EntrySlice,
    MemoryStore,
    Message,
    MessageEntry,
    SessionMeta,
    SessionStore,
    build_context,
)
from sessionstore.integrations import kept
from sessionstore.integrations.langchain import ChatHistories, SessionStoreChatMessageHistory
from sessionstore.integrations.openai_agents import StoreSession
from sessionstore.integrations.pydantic_ai import MessageHistories, load_history, save_messages

pytestmark = pytest.mark.asyncio


class Counting:
    """A store that counts the entries its reads hand back, and the heads it reads."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.read = 0
        self.heads = 0  # the heads read
        self.checked = 0  # the reads that stated where they expect a head
        self.kept_here: dict[str, Any] = {}  # what adapters keep on this object

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def kept(self, owner: str, make: Any) -> Any:
        """As a store's `kept`, apart from the store's own: this object
        stands for another process."""
        if owner not in self.kept_here:
            self.kept_here[owner] = make()
        return self.kept_here[owner]

    async def load(self, session_id: str) -> list[Any]:
        entries = await self.store.load(session_id)
        self.read += len(entries)
        return entries

    async def load_slice(
        self, session_id: str, start: int = 0, stop: int | None = None, **expect: Any
    ) -> Any:
        got: EntrySlice = await self.store.load_slice(session_id, start, stop, **expect)
        self.read += len(got.entries)
        self.checked += "expect_head" in expect
        return got

    async def load_context(self, session_id: str, **options: Any) -> Any:
        messages = await self.store.load_context(session_id, **options)
        self.read += len(messages)
        return messages

    async def head(self, name: str) -> str | None:
        self.heads += 1
        return await self.store.head(name)

    def counted(self) -> int:
        read, self.read = self.read, 0
        return read


def user(n: int) -> Any:
    return {"role": "user", "content": f"message {n}"}


def elsewhere(store: SessionStore) -> Any:
    """``store`` through another object, as another process sees it: the
    sessions on it keep nothing the sessions on ``store`` kept."""
    return Counting(store)


async def fresh_items(store: SessionStore, limit: int | None = None) -> list[Any]:
    return await StoreSession(elsewhere(store), "chat").get_items(limit)


# ------------------------------------------------------------ openai-agents


async def test_a_read_after_a_turn_reads_only_the_turn(async_store: SessionStore) -> None:
    counting: Any = Counting(async_store)
    session = StoreSession(counting, "chat")
    await session.add_items([user(n) for n in range(300)])
    assert len(await session.get_items()) == 300
    assert counting.counted() >= 300
    answer: Any = {"role": "assistant", "content": "an answer"}
    await session.add_items([user(300), answer])
    got = await session.get_items()
    # The add reads back as many entries as it adds (to tell a resumed
    # turn's input); the read, the last entry kept, re-read, and the two new.
    assert counting.counted() <= 2 + 3
    assert got == await fresh_items(async_store)
    assert len(got) == 302


async def test_a_limited_first_read_reads_about_the_limit(async_store: SessionStore) -> None:
    await StoreSession(async_store, "chat").add_items([user(n) for n in range(1000)])
    counting: Any = Counting(async_store)
    got = await StoreSession(counting, "chat").get_items(limit=20)
    assert got == [user(n) for n in range(980, 1000)]
    assert counting.counted() <= 64


async def test_a_whole_read_after_a_limited_one_keeps_the_whole(async_store: SessionStore) -> None:
    # A preview asks for the last 20, the Runner for everything: its next
    # turns read what they added, not everything before the preview's part.
    await StoreSession(async_store, "chat").add_items([user(n) for n in range(1000)])
    counting: Any = Counting(async_store)
    assert len(await StoreSession(counting, "chat").get_items(limit=20)) == 20
    assert await StoreSession(counting, "chat").get_items() == [user(n) for n in range(1000)]
    counting.counted()
    await StoreSession(counting, "chat").add_items([user(1000)])
    assert len(await StoreSession(counting, "chat").get_items()) == 1001
    assert counting.counted() <= 1 + 2  # the input's length, to tell a resumed turn
    assert await StoreSession(counting, "chat").get_items(limit=500) == [
        user(n) for n in range(501, 1001)
    ]
    assert counting.counted() <= 1


async def test_items_changed_by_the_caller_change_nothing_kept(async_store: SessionStore) -> None:
    session = StoreSession(async_store, "chat")
    item: Any = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    await session.add_items([item])
    first: Any = await session.get_items()
    first[0]["content"][0]["text"] = "changed"
    first[0]["role"] = "assistant"
    assert await session.get_items() == [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    await session.add_items([user(1)])  # a flat item, copied another way
    flat: Any = (await session.get_items())[-1]
    assert type(flat) is dict
    flat["content"] = "changed"
    assert (await session.get_items())[-1] == user(1)


async def test_flat_items_handed_out_give_the_collector_nothing_to_walk(
    async_store: SessionStore,
) -> None:
    # A get_items of 10,000 items tracked by the collector pushes them into
    # its oldest generation, and a full collection follows every other call.
    session = StoreSession(async_store, "chat")
    nested: Any = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    await session.add_items([user(n) for n in range(3)] + [nested])
    handed = await session.get_items()
    assert [gc.is_tracked(item) for item in handed] == [False, False, False, True]
    assert handed[-1] == nested


async def test_a_new_session_object_reads_on_from_what_the_last_one_read(
    async_store: SessionStore,
) -> None:
    # A server makes a StoreSession for each request, on one store object.
    counting: Any = Counting(async_store)
    await StoreSession(counting, "chat").add_items([user(n) for n in range(300)])
    assert len(await StoreSession(counting, "chat").get_items()) == 300
    assert counting.counted() >= 300
    await StoreSession(counting, "chat").add_items([user(300), user(301)])
    got = await StoreSession(counting, "chat").get_items()
    # The add reads back as many entries as it adds (to tell a resumed
    # turn's input); the read, the last entry kept, re-read, and the two new.
    assert counting.counted() <= 2 + 3
    assert got == await fresh_items(async_store)
    await StoreSession(counting, "other").add_items([user(0)])
    assert await StoreSession(counting, "other").get_items() == [user(0)]
    counting.heads = counting.checked = 0
    assert len(await StoreSession(counting, "chat").get_items()) == 302
    # It starts where the session kept is, the read checking the head names it.
    assert (counting.heads, counting.checked) == (0, 1)
    assert await StoreSession(elsewhere(async_store), "chat").pop_item() == user(301)
    assert len(await StoreSession(counting, "chat").get_items()) == 301  # refused, read again


async def test_what_other_objects_did_is_read(async_store: SessionStore) -> None:
    ours, theirs = StoreSession(async_store, "chat"), StoreSession(elsewhere(async_store), "chat")
    await ours.add_items([user(n) for n in range(5)])
    assert len(await ours.get_items()) == 5
    await theirs.add_items([user(5)])
    assert await ours.get_items() == [user(n) for n in range(6)]
    assert await theirs.pop_item() == user(5)  # the head moves to a fork
    assert await ours.get_items() == [user(n) for n in range(5)]
    assert await ours.get_items(limit=2) == [user(3), user(4)]
    await theirs.clear_session()
    assert await ours.get_items() == []
    await theirs.add_items([user(10)])
    await theirs.pop_item()  # the head moves on without ours seeing it
    await ours.add_items([user(11)])  # lands where the head stands now
    assert await StoreSession(async_store, "chat").get_items() == [user(11)]


async def test_a_session_erased_and_made_again_is_read_afresh(async_store: SessionStore) -> None:
    session = StoreSession(async_store, "chat")
    await session.add_items([user(n) for n in range(4)])
    assert len(await session.get_items()) == 4
    await async_store.erase("chat", reason="test")
    await async_store.create(SessionMeta(id="chat"))  # the head names it again
    await StoreSession(async_store, "chat").add_items([user(n) for n in range(10, 16)])
    assert await session.get_items() == [user(n) for n in range(10, 16)]


async def test_past_the_bound_reads_still_give_everything(
    async_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kept, "KEPT", 10)
    session = StoreSession(async_store, "chat")
    await session.add_items([user(n) for n in range(30)])
    assert await session.get_items() == [user(n) for n in range(30)]
    assert await session.get_items(limit=25) == [user(n) for n in range(5, 30)]
    assert await session.get_items(limit=5) == [user(n) for n in range(25, 30)]
    await session.add_items([user(30)])
    assert await session.get_items() == [user(n) for n in range(31)]
    assert await session.get_items(limit=12) == [user(n) for n in range(19, 31)]


async def test_compactions_are_not_items_and_leave_the_reads_alone(
    async_store: SessionStore,
) -> None:
    session = StoreSession(async_store, "chat")
    await session.add_items([user(n) for n in range(6)])
    assert len(await session.get_items()) == 6
    current = await session.current_session()
    assert current is not None
    await async_store.compact(current, "the first four", keep_last=2)
    await session.add_items([user(6)])
    assert await session.get_items() == [user(n) for n in range(7)]


# ------------------------------------------------------------ LangChain


async def test_langchain_histories_from_the_factory_read_only_the_turn(
    async_store: SessionStore,
) -> None:
    counting: Any = Counting(async_store)
    histories = ChatHistories(counting)
    await histories("chat").aadd_messages([HumanMessage(f"q{n}") for n in range(200)])
    assert len(await histories("chat").aget_messages()) == 200
    counting.counted()
    await histories("chat").aadd_messages([HumanMessage("q"), AIMessage("a")])
    got = await histories("chat").aget_messages()
    assert counting.counted() <= 3
    assert histories("chat") is histories("chat")
    fresh = SessionStoreChatMessageHistory(async_store, "chat")
    assert got == await fresh.aget_messages()
    assert [message.content for message in got[-2:]] == ["q", "a"]


async def test_a_langchain_turn_reads_no_head_of_its_own(async_store: SessionStore) -> None:
    """The read states where it expects the head, as the add does: a turn
    reads no head, and a head moved elsewhere is followed."""
    counting: Any = Counting(async_store)
    histories = ChatHistories(counting)
    await histories("chat").aadd_messages([HumanMessage("q0")])
    counting.heads = 0
    for n in range(1, 4):
        assert len(await histories("chat").aget_messages()) == 2 * n - 1
        await histories("chat").aadd_messages([HumanMessage(f"q{n}"), AIMessage(f"a{n}")])
    assert (counting.heads, counting.checked) == (0, 3)
    await SessionStoreChatMessageHistory(async_store, "chat").aclear()  # another history
    assert await histories("chat").aget_messages() == []  # refused, then read where it stands
    await histories("chat").aadd_messages([HumanMessage("after")])
    assert [m.content for m in await histories("chat").aget_messages()] == ["after"]


async def test_langchain_reads_a_new_compaction_as_its_summary(async_store: SessionStore) -> None:
    history = ChatHistories(async_store)("chat")
    await history.aadd_messages([HumanMessage(f"q{n}") for n in range(6)])
    assert len(await history.aget_messages()) == 6
    fresh = SessionStoreChatMessageHistory(async_store, "chat")
    session = (await async_store.heads()) and await async_store.head("chat")
    assert session
    await async_store.compact(session, "what was said", keep_last=2)
    got = await history.aget_messages()
    assert got == await fresh.aget_messages()
    assert [message.content for message in got] == [
        "[Conversation summary]\nwhat was said",
        "q4",
        "q5",
    ]
    await history.aclear()
    assert await history.aget_messages() == []


# ------------------------------------------------------------ pydantic-ai


def exchange(n: int) -> list[Any]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {n}")]),
        ModelResponse(parts=[TextPart(f"answer {n}")]),
    ]


async def test_pydantic_ai_histories_read_only_the_turn(async_store: SessionStore) -> None:
    session = await async_store.create(SessionMeta.new())
    await save_messages(async_store, session, [m for n in range(50) for m in exchange(n)])
    counting: Any = Counting(async_store)
    histories = MessageHistories(counting)
    assert len(await histories.load(session)) == 100
    counting.counted()
    await histories.save(session, exchange(50))
    got = await histories.load(session)
    assert counting.counted() <= 3
    assert got == await load_history(async_store, session)
    assert len(got) == 102
    await async_store.compact(session, "fifty exchanges", keep_last=2)
    compacted = await histories.load(session)
    assert contents(compacted) == contents(await load_history(async_store, session))
    assert contents(compacted) == [
        ["[Conversation summary]\nfifty exchanges"],
        ["question 50"],
        ["answer 50"],
    ]


def contents(history: list[Any]) -> list[list[Any]]:
    """The parts' contents: a summary's request is stamped with the time it is read."""
    return [[part.content for part in message.parts] for message in history]


async def test_a_message_with_the_id_a_compaction_waits_for_moves_the_kept_start(
    async_store: SessionStore,
) -> None:
    # A compaction keeping from an id no message has yet keeps what follows
    # it; the first message with that id, arriving later, is where it starts.
    session = await async_store.create(SessionMeta.new())
    histories = MessageHistories(async_store)
    await save_messages(async_store, session, exchange(0))
    await async_store.append(session, CompactionEntry.new("earlier", "later"))
    await save_messages(async_store, session, exchange(1))
    assert contents(await histories.load(session))[1:] == [["question 1"], ["answer 1"]]
    answer = MessageEntry(id="later", timestamp="t", message=Message.user("from here"))
    await async_store.append(session, answer)
    got = await histories.load(session)
    assert contents(got) == [["[Conversation summary]\nearlier"], ["from here"]]
    assert contents(got) == contents(await load_history(async_store, session))


async def test_a_kept_context_is_the_one_definition_over_random_histories() -> None:
    """Messages with ids of a few (some repeat), compactions keeping from
    any of them or one never used: after each step, what a `KeptContext`
    hands out is `build_context` of the log."""

    async def run(steps: list[tuple[bool, int]]) -> None:
        store = MemoryStore()
        session = await store.create(SessionMeta.new())
        context: kept.KeptContext[Message] = kept.KeptContext(lambda new, _: list(new))
        for n, (compact, pick) in enumerate(steps):
            if compact:
                await store.append(session, CompactionEntry.new(f"summary {n}", f"m{pick % 7}"))
            else:
                said = MessageEntry(id=f"m{pick % 6}", timestamp="t", message=Message.user(f"{n}"))
                await store.append(session, said)
            assert await context.read(store, session) == build_context(await store.load(session))

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=20))
    def check(steps: list[tuple[bool, int]]) -> None:
        asyncio.run(run(steps))

    await asyncio.to_thread(check)


# ------------------------------------------------------------ factories


async def test_a_factory_keeps_a_value_per_name_for_the_last_names_used() -> None:
    made: list[str] = []

    def make(name: str) -> list[str]:
        made.append(name)
        return [name]

    latest: kept.Latest[list[str]] = kept.Latest(make, most=2)
    first, second = latest.get("a"), latest.get("b")
    assert latest.get("a") is first  # used again: now the latest
    latest.get("c")  # past the bound: "b", used longest ago, goes
    assert latest.get("a") is first
    assert latest.get("b") is not second
    assert made == ["a", "b", "c", "b"]


async def test_a_factory_weighing_its_values_drops_the_oldest_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kept, "KEPT_IN_ALL", 10)
    latest: kept.Latest[list[str]] = kept.Latest(lambda name: [], most=100, weigh=len)
    a, b = latest.get("a"), latest.get("b")
    a.extend("x" * 6)  # as a first read fills what a new name kept
    b.extend("x" * 4)
    latest.get("c")  # 10 kept: within the budget
    assert latest.get("a") is a
    assert latest.get("b") is b
    latest.get("c").extend("x")  # 11, weighed when the next name is made
    latest.get("d")
    assert latest.get("b") is b  # "a", used longest ago, went
    assert latest.get("a") is not a
    for _ in range(kept._REWEIGH):  # weighed again every so many uses
        latest.get("b")
    b.extend("x" * 20)  # one value past the budget alone stays, the latest
    for _ in range(kept._REWEIGH):
        latest.get("b")
    assert latest.get("b") is b
    latest.get("c")  # a name made: "b", used longest ago, goes
    assert latest.get("b") is not b


async def test_every_keeper_drops_the_conversations_used_longest_ago_past_its_budget(
    async_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kept, "KEPT_IN_ALL", 6 * kept.ITEM_BYTES + 100)
    sessions = []
    for name in ("a", "b", "c"):  # four messages each: two conversations pass the budget
        await StoreSession(async_store, name).add_items([user(n) for n in range(4)])
        sessions.append(await async_store.head(name))
    counting: Any = Counting(async_store)
    histories, conversions = ChatHistories(counting), MessageHistories(counting)
    readers: dict[str, Any] = {
        "openai-agents": lambda name, _: StoreSession(counting, name).get_items(),
        "LangChain": lambda name, _: histories(name).aget_messages(),
        "pydantic-ai": lambda _, session: conversions.load(session),
    }
    for keeper, read in readers.items():
        for name, session in zip(("a", "b"), sessions, strict=False):
            assert len(await read(name, session)) == 4
        counting.counted()
        await read("b", sessions[1])
        assert counting.counted() <= 1, keeper  # "b" is kept
        await read("c", sessions[2])  # made: 8 kept, and "a", used longest ago, goes
        assert counting.counted() == 4, keeper
        await read("a", sessions[0])
        assert counting.counted() == 4, keeper  # read whole again
        await read("c", sessions[2])
        assert counting.counted() <= 1, keeper


BIG = "x" * 16_000


def big(n: int) -> Any:
    return {"role": "user", "content": f"message {n} {BIG}"}


async def test_what_a_conversation_keeps_is_bounded_by_bytes_not_items(
    async_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kept, "KEPT_BYTES", 2**20)  # 64 items of 16 KB
    await StoreSession(async_store, "chat").add_items([big(n) for n in range(100)])
    session_id = await async_store.head("chat")
    assert session_id is not None
    items = kept.KeptItems(lambda _, entry: entry, lambda entry: entry)
    assert len(await items.read(async_store, session_id, None)) == 100  # all given
    assert 2**20 - 17_100 < items.weight <= 2**20  # the latest that fit kept
    assert items.count < 100
    context: kept.KeptContext[Any] = kept.KeptContext(lambda messages, _: list(messages))
    assert len(await context.read(async_store, session_id)) == 100
    assert context.weight == 0  # past the bound: a context is not kept
    history = SessionStoreChatMessageHistory(async_store, "chat")
    assert len(await history.aget_messages()) == 100
    assert history.kept_weight == 0
    await StoreSession(async_store, "chat").add_items([user(100)])
    assert len(await items.read(async_store, session_id, None)) == 101
    assert items.weight <= 2**20
    assert len(await items.read(async_store, session_id, 3)) == 3


async def test_many_large_items_in_many_conversations_stay_under_the_budget(
    async_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kept, "KEPT_IN_ALL", 3 * 2**20)
    sessions = []
    for name in ("a", "b", "c", "d", "e"):  # 1.6 MB each: 100 items of 16 KB
        await StoreSession(async_store, name).add_items([big(n) for n in range(100)])
        sessions.append(await async_store.head(name))
    latest = kept.Latest(
        lambda _: kept.KeptItems(lambda _, entry: entry, lambda entry: entry),
        most=256,
        weigh=lambda value: value.weight,
    )
    for session_id in [*sessions, "next"]:
        assert session_id is not None
        value = latest.get(session_id)  # a name made: all weighed, the oldest dropped
        assert latest.weight <= 3 * 2**20
        if session_id != "next":
            assert len(await value.read(async_store, session_id, None)) == 100
    assert latest.weight > 16_000 * 100  # the latest conversation stays kept
    counting: Any = Counting(async_store)
    for name in ("a", "b", "c", "d", "e"):
        assert len(await StoreSession(counting, name).get_items()) == 100
    counting.counted()
    assert len(await StoreSession(counting, "e").get_items()) == 100
    assert counting.counted() <= 1  # the latest is kept
    assert len(await StoreSession(counting, "a").get_items()) == 100
    assert counting.counted() == 100  # "a", used longest ago, went: by bytes, at 500 items


class Elsewhere:
    """A store written elsewhere, with no `kept` of its own."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name == "kept":
            raise AttributeError(name)
        return getattr(self.store, name)


async def test_sessions_on_a_store_without_kept_keep_their_own(async_store: SessionStore) -> None:
    store: Any = Elsewhere(async_store)
    session = StoreSession(store, "chat")
    await session.add_items([user(0)])
    assert await session.get_items() == [user(0)]
    await StoreSession(store, "chat").add_items([user(1)])
    assert await StoreSession(store, "chat").get_items() == [user(0), user(1)]
    assert await session.get_items() == [user(0), user(1)]


async def test_what_sessions_keep_is_the_store_objects_and_drop_caches_forgets_it(
    async_store: SessionStore,
) -> None:
    counting: Any = Counting(async_store)
    await StoreSession(counting, "chat").add_items([user(n) for n in range(50)])
    assert len(await StoreSession(counting, "chat").get_items()) == 50
    counting.counted()
    assert len(await StoreSession(counting, "chat").get_items()) == 50
    assert counting.counted() <= 1  # read on from what the last session read
    counting.kept_here.clear()  # what a store's drop_caches does to it
    assert len(await StoreSession(counting, "chat").get_items()) == 50
    assert counting.counted() >= 50
    # On the store itself: kept for its owner until drop_caches.
    first = async_store.kept("test", object)  # type: ignore[attr-defined]
    assert async_store.kept("test", object) is first  # type: ignore[attr-defined]
    async_store.drop_caches()
    assert async_store.kept("test", object) is not first  # type: ignore[attr-defined]


async def test_kept_gives_what_a_read_kept_of_a_session_s_start(async_store: SessionStore) -> None:
    session = await async_store.create(SessionMeta.new())
    await StoreSession(async_store, session).add_items([user(n) for n in range(3)])
    items: kept.KeptItems[Any, Any] = kept.KeptItems(lambda _, entry: entry.id, lambda item: item)
    assert items.kept(session) is None  # nothing read yet
    ids = await items.read(async_store, session, None)
    assert items.kept(session) == tuple(ids)
    assert items.kept("another") is None
    await items.read(async_store, session, 1)  # what is kept still starts at the start
    assert items.kept(session) == tuple(ids)
