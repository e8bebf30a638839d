"""StoreSession against the real openai-agents: the Runner on a scripted model,
items round-tripping exactly, pops and clears as branches, and races.

Without openai-agents these tests skip (fail under CI=true): `require`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from tests.integrations import require

require("agents", extra="openai-agents")

from agents import Runner, TResponseInputItem
from agents.memory import Session, SessionSettings

from sessionstore import (
    ClosedError,
    CompactionEntry,
    CorruptSessionError,
    InvalidRecordError,
    InvalidSessionIdError,
    Message,
    MessageEntry,
    SessionEntry,
    SessionMeta,
    SessionStore,
    decode_entry,
    encode,
    open_store,
)
from sessionstore.integrations.openai_agents import (
    MARKER,
    InvalidItemError,
    StoreSession,
    item_from_message,
    message_from_item,
)
from sessionstore.verify import verify_store
from tests.cli.helpers import run
from tests.integrations.scripted import (
    NO_TRACING,
    ScriptedModel,
    agent_on,
    answer,
    call_clock,
)
from tests.kinds import StoreTargets

CHAT = "chat-42"


@pytest.fixture
def store(async_store: SessionStore) -> SessionStore:
    """A new, empty store of each kind the adapters are tested on."""
    return async_store


def items(*dicts: dict[str, Any]) -> list[TResponseInputItem]:
    return [cast(TResponseInputItem, item) for item in dicts]


def user(text: str) -> dict[str, Any]:
    return {"content": text, "role": "user"}


def canonical(value: object) -> str:
    """Equal for equal JSON only: ``1`` and ``1.0``, ``True`` and ``1`` differ here."""
    return json.dumps(value, sort_keys=True)


def texts(given: Sequence[dict[str, Any]]) -> list[str]:
    """Each input item in short: its text, or its type."""
    return [
        item["content"]
        if isinstance(item.get("content"), str)
        else item["content"][0]["text"]
        if item.get("role")
        else item["type"]
        for item in given
    ]


# ------------------------------------------------------------------ the Runner


async def test_a_turn_with_a_tool_call_is_stored_and_the_next_turn_sees_it(
    store: SessionStore,
) -> None:
    model = ScriptedModel(call_clock("c1"), answer("It is 9.", "msg_1"), answer("Bye.", "msg_2"))
    session = StoreSession(store, CHAT)

    result = await Runner.run(agent_on(model), "Time?", session=session, run_config=NO_TRACING)
    assert result.final_output == "It is 9."
    turn = await session.get_items()
    assert texts(cast(list[dict[str, Any]], turn)) == [
        "Time?",
        "function_call",
        "function_call_output",
        "It is 9.",
    ]
    assert cast(dict[str, Any], turn[2])["output"] == "09:00"

    await Runner.run(agent_on(model), "Thanks", session=session, run_config=NO_TRACING)
    # The second turn's model call got the whole first turn, then the new input.
    assert model.inputs[-1] == [*turn, user("Thanks")]
    assert texts(cast(list[dict[str, Any]], await session.get_items()))[-2:] == ["Thanks", "Bye."]
    # One session held it all: no move, nothing but the conversation's own session.
    assert [move.session_id for move in await store.head_history(CHAT)] == [CHAT]
    assert await store.integrity() == []


async def test_a_retry_pops_the_turn_and_reruns_it_on_a_branch(store: SessionStore) -> None:
    model = ScriptedModel(answer("Nine.", "msg_1"), answer("It is nine o'clock.", "msg_2"))
    session = StoreSession(store, CHAT)
    await Runner.run(agent_on(model), "Time?", session=session, run_config=NO_TRACING)
    first = await session.get_items()

    assert await session.pop_item() == first[1]  # the answer
    assert await session.pop_item() == first[0]  # the question
    await Runner.run(agent_on(model), "Time?", session=session, run_config=NO_TRACING)

    assert model.inputs[-1] == [user("Time?")]  # the retry saw none of the first try
    assert texts(cast(list[dict[str, Any]], await session.get_items())) == [
        "Time?",
        "It is nine o'clock.",
    ]
    assert [item_from_message(m) for m in await store.load_context(CHAT)] == first
    assert await store.integrity() == []


def test_sessionstore_show_names_the_conversation_as_its_agent_sees_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "sessions.db")

    async def edit(change: Callable[[StoreSession], Awaitable[object]]) -> None:
        async with open_store(db) as store:
            await change(StoreSession(store, CHAT))

    def shown() -> list[str]:
        status, out, _ = run(capsys, "--db", db, "show", CHAT)
        assert status == 0
        return [line.split("\t")[4] for line in out.splitlines()[1:]]

    asyncio.run(edit(lambda s: s.add_items(items(user("Time?"), user("Nine.")))))
    asyncio.run(edit(lambda s: s.pop_item()))  # a retry: the answer goes
    assert shown() == ["Time?"]
    asyncio.run(edit(lambda s: s.clear_session()))
    asyncio.run(edit(lambda s: s.add_items(items(user("Hello.")))))
    assert shown() == ["Hello."]


async def test_clear_session_then_a_run_starts_from_nothing(store: SessionStore) -> None:
    model = ScriptedModel(answer("Nine.", "msg_1"), answer("Hello.", "msg_2"))
    session = StoreSession(store, CHAT)
    await Runner.run(agent_on(model), "Time?", session=session, run_config=NO_TRACING)
    await session.clear_session()
    assert await session.get_items() == []

    await Runner.run(agent_on(model), "Hi", session=session, run_config=NO_TRACING)
    assert model.inputs[-1] == [user("Hi")]
    current = await session.current_session()
    assert current is not None
    assert (await parents(store))[current] == CHAT
    assert len(await store.load(CHAT)) == 2  # the first session is whole


async def test_the_runner_reads_only_the_session_settings_limit(store: SessionStore) -> None:
    model = ScriptedModel(answer("One.", "m1"), answer("Two.", "m2"), answer("Three.", "m3"))
    session = StoreSession(store, CHAT, session_settings=SessionSettings(limit=2))
    for question in ("1?", "2?", "3?"):
        await Runner.run(agent_on(model), question, session=session, run_config=NO_TRACING)
    assert texts(model.inputs[-1]) == ["2?", "Two.", "3?"]
    assert len(await session.get_items(limit=None)) == 2
    assert len(await StoreSession(store, CHAT).get_items()) == 6


# ------------------------------------------------------------- the round trip

ITEMS: dict[str, dict[str, Any]] = {
    "user text": {"content": "What time is it?", "role": "user"},
    "user parts": {
        "role": "user",
        "type": "message",
        "content": [
            {"type": "input_text", "text": "Look: "},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "auto"},
            {"type": "input_file", "file_id": "file-1"},
        ],
    },
    "system": {"role": "system", "content": "Be brief."},
    "developer": {"role": "developer", "content": [{"type": "input_text", "text": "No jokes."}]},
    "assistant output": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is 9.", "annotations": [], "logprobs": []}],
    },
    "refusal": {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I cannot."}],
    },
    "function_call": {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "clock",
        "arguments": '{"tz": "UTC"}',
        "status": "completed",
    },
    "function_call_output": {"type": "function_call_output", "call_id": "call_1", "output": "9"},
    "function_call_output parts": {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "9"}],
    },
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "The user wants the time."}],
        "encrypted_content": "gAAAAB...",
    },
    "item reference": {"type": "item_reference", "id": "msg_0"},
    "a future item type": {
        "type": "hologram_call",
        "id": "hc_1",
        "payload": {
            "deep": [[[{"x": None, "y": [True, False]}]]],
            "text": 'é 😀 \u2028 \x00 "quoted" \\',
            "numbers": [0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, -2.5e-7, 1e300, 3.0],
            "empty": [{}, [], ""],
        },
    },
    "no role nor type": {"note": "kept", "nested": {"a": [1, {"b": None}]}},
    "empty": {},
    "a role that is not a string": {"role": 7, "content": "x"},
    "a role without content": {"role": "assistant", "type": "message", "id": "m"},
    "null content": {"role": "assistant", "content": None},
    "a streaming field of its own": {"role": "assistant", "content": "hi", "streaming": True},
    "a false streaming field": {"role": "assistant", "content": "hi", "streaming": False},
    "the marker field of its own": {"role": "user", "content": "hi", MARKER: "item"},
    "the marker with the item layout": {"type": "x", MARKER: "item", "content": {"a": 1}},
    "fields before role": {"status": "completed", "content": "c", "id": "m", "role": "assistant"},
}


async def test_every_item_kind_round_trips_exactly(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    given = items(*ITEMS.values())
    await session.add_items(given)
    assert await session.get_items() == given
    assert canonical(await session.get_items()) == canonical(given)
    for last in reversed(given):
        popped = await session.pop_item()
        assert canonical(popped) == canonical(last)
    assert await session.pop_item() is None
    assert await store.integrity() == []


@pytest.mark.parametrize("name", ITEMS)
def test_each_item_survives_the_wire_format(name: str) -> None:
    message = message_from_item(ITEMS[name])
    entry = MessageEntry.new(message)
    decoded = decode_entry(encode(entry))
    assert isinstance(decoded, MessageEntry)
    assert canonical(item_from_message(decoded.message)) == canonical(ITEMS[name])
    assert decoded.message.streaming is False
    assert decoded.message.extra[MARKER] in ("message", "item")


def test_items_with_a_role_keep_it_and_their_content() -> None:
    message = message_from_item(ITEMS["assistant output"])
    assert (message.role, message.text()) == ("assistant", "It is 9.")
    assert message.extra == {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        MARKER: "message",
    }
    assert message_from_item(ITEMS["user text"]).text() == "What time is it?"


def test_items_without_a_role_are_kept_whole_under_their_type() -> None:
    call = message_from_item(ITEMS["function_call"])
    assert (call.role, call.content, call.extra) == (
        "function_call",
        ITEMS["function_call"],
        {MARKER: "item"},
    )
    assert message_from_item(ITEMS["no role nor type"]).role == "item"
    assert message_from_item(ITEMS["a role that is not a string"]).role == "item"
    # Fields our Message gives a meaning to keep the item whole, under its role.
    own = message_from_item(ITEMS["a streaming field of its own"])
    assert (own.role, own.streaming, own.extra) == ("assistant", False, {MARKER: "item"})


async def test_load_context_of_an_adapter_session_reads_as_a_conversation(
    store: SessionStore,
) -> None:
    session = StoreSession(store, CHAT)
    keys = ["user text", "function_call", "function_call_output", "assistant output"]
    await session.add_items(items(*(ITEMS[key] for key in keys)))
    context = await store.load_context(CHAT)
    assert [(m.role, m.text()) for m in context] == [
        ("user", "What time is it?"),
        ("function_call", ""),
        ("function_call_output", ""),
        ("assistant", "It is 9."),
    ]
    assert all(m.extra[MARKER] in ("message", "item") and not m.streaming for m in context)


def test_a_mapping_is_required() -> None:
    with pytest.raises(InvalidRecordError, match="JSON object"):
        message_from_item(cast(Any, ["role", "user"]))


def test_a_layout_from_a_newer_version_is_refused() -> None:
    with pytest.raises(InvalidRecordError, match="layout"):
        item_from_message(Message(role="user", content="hi", openai_agents="hologram"))
    with pytest.raises(InvalidRecordError, match="layout"):
        item_from_message(Message(role="x", content="not a dict", openai_agents="item"))


async def test_get_items_names_the_session_and_entry_it_cannot_read(store: SessionStore) -> None:
    await store.create(SessionMeta(id=CHAT))
    newer = Message(role="user", content="hi", openai_agents="hologram")
    await store.append(CHAT, MessageEntry(id="e1", timestamp="t", message=newer))
    with pytest.raises(CorruptSessionError, match=r"'chat-42'.*'e1'.*hologram"):
        await StoreSession(store, CHAT).get_items()


# ------------------------------------------------------------------ add_items


async def test_add_items_stores_all_or_none(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    await session.add_items(items(user("kept")))
    with pytest.raises(InvalidRecordError):
        await session.add_items(items(user("a"), {"type": "x", "value": float("nan")}))
    with pytest.raises(InvalidRecordError):
        await session.add_items([*items(user("b")), cast(TResponseInputItem, "not an item")])
    assert await session.get_items() == [user("kept")]
    assert len(await store.load(CHAT)) == 1


async def test_a_refused_first_add_is_a_type_error_and_creates_nothing(
    store: SessionStore,
) -> None:
    session = StoreSession(store, CHAT)
    for bad in ({"role": "user", "content": object()}, "not an item"):
        with pytest.raises(TypeError) as caught:  # as openai-agents' own sessions raise
            await session.add_items([cast(TResponseInputItem, bad)])
        assert isinstance(caught.value, InvalidItemError)
        assert isinstance(caught.value, InvalidRecordError)
    assert await store.list() == []
    assert await store.heads() == []


async def test_a_closed_session_refuses_every_call(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    await session.add_items(items(user("hi")))
    await session.close()
    calls = [
        session.get_items(),
        session.add_items([]),
        session.add_items(items(user("more"))),
        session.pop_item(),
        session.clear_session(),
        session.current_session(),
    ]
    for call in calls:
        with pytest.raises(ClosedError, match="StoreSession is closed") as caught:
            await call
        assert isinstance(caught.value, RuntimeError)
    await session.close()  # twice is fine
    assert await StoreSession(store, CHAT).get_items() == [user("hi")]  # the store stays open


def test_close_from_blocking_code_closes_the_store_it_opened(tmp_path: Path) -> None:
    target = tmp_path / "chat.db"

    async def opened() -> StoreSession:
        return await StoreSession.open(target, CHAT)

    session = asyncio.run(opened())
    asyncio.run(session.add_items(items(user("hi"))))
    session.close()  # not awaited: as openai-agents' SQLiteSession.close is called
    with pytest.raises(ClosedError):
        asyncio.run(session.store.head(CHAT))  # its store is closed too
    session.close()  # twice is fine
    reopened = asyncio.run(opened())
    assert asyncio.run(reopened.get_items()) == [user("hi")]
    asyncio.run(cast(Coroutine[Any, Any, None], reopened.close()))  # closed at the call
    with pytest.raises(ClosedError):
        asyncio.run(reopened.store.head(CHAT))


async def test_the_first_add_creates_the_session_and_reads_never_write(
    store: SessionStore,
) -> None:
    session = StoreSession(store, CHAT)
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()
    await session.add_items([])
    assert await store.list() == []
    assert await store.heads() == []

    await session.add_items(items(user("hi")))
    assert [meta.id for meta in await store.list()] == [CHAT]
    assert await store.head(CHAT) == CHAT


async def test_a_session_begun_with_the_store_api_is_continued(store: SessionStore) -> None:
    await store.create(SessionMeta(id=CHAT))
    first = MessageEntry.new(Message.user("Hi"))
    reply = MessageEntry.new(Message(role="assistant", content="Hello", name="bot"))
    entries: list[SessionEntry] = [first, reply, CompactionEntry.new("greetings", first.id)]
    await store.append_many(CHAT, entries)
    session = StoreSession(store, CHAT)

    expected = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello", "name": "bot"},
    ]
    assert await session.get_items() == expected  # a compaction is no item
    await session.add_items(items(user("Again")))
    assert await session.get_items() == [*expected, user("Again")]
    assert await store.head(CHAT) == CHAT


def test_the_conversation_name_follows_the_session_id_rule() -> None:
    with pytest.raises(InvalidSessionIdError):
        StoreSession(cast(SessionStore, None), "a/b")
    with pytest.raises(InvalidSessionIdError):
        StoreSession.open("memory://", "")


# ------------------------------------------------------------------- get_items


async def test_get_items_limit_gives_the_latest_in_order(store: SessionStore) -> None:
    session = StoreSession(store, CHAT, session_settings=SessionSettings(limit=3))
    given = items(*(user(str(n)) for n in range(6)))
    await session.add_items(given[:4])
    await store.append(CHAT, CompactionEntry.new("summary", "x"))  # not an item
    await session.add_items(given[4:])
    assert await session.get_items(2) == given[4:]
    assert await session.get_items() == given[3:]  # the settings' limit
    assert await session.get_items(100) == given
    assert await session.get_items(0) == []
    assert await session.get_items(-1) == given  # as SQLite's LIMIT -1 reads
    every = StoreSession(store, CHAT, session_settings={"limit": -5})
    assert await every.get_items() == given
    assert await StoreSession(store, CHAT).get_items() == given


# ------------------------------------------------------ pop and clear: branches


async def parents(store: SessionStore) -> dict[str, str | None]:
    return {meta.id: meta.parent_session for meta in await store.list()}


async def test_pop_and_clear_keep_every_entry_on_branches(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    u1, a1, u2, a2, u3, u4 = items(*(user(name) for name in ("u1", "a1", "u2", "a2", "u3", "u4")))
    await session.add_items([u1, a1, u2, a2])
    assert await session.pop_item() == a2
    assert await session.pop_item() == u2
    await session.add_items([u3])
    await session.clear_session()
    await session.add_items([u4])

    branches = [move.session_id for move in await store.head_history(CHAT)]
    assert len(branches) == 4
    assert branches[0] == CHAT
    tree = await parents(store)
    assert [tree[branch] for branch in branches] == [None, *branches[:-1]]
    held = [[item_from_message(m) for m in await store.load_context(branch)] for branch in branches]
    assert held == [[u1, a1, u2, a2], [u1, a1, u2], [u1, a1, u3], [u4]]
    assert await session.get_items() == [u4]
    assert await store.integrity() == []
    report = await verify_store(store)
    assert report.ok, report.faults
    assert report.entries == 4 + 3 + 3 + 1


async def test_popping_the_only_item_starts_an_empty_child(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    await session.add_items(items(user("only")))
    assert await session.pop_item() == user("only")
    current = await session.current_session()
    assert current is not None
    assert current != CHAT
    assert (await parents(store))[current] == CHAT
    assert await store.load(current) == []
    assert await session.pop_item() is None
    assert len(await store.head_history(CHAT)) == 2  # popping nothing moves nothing


async def test_clearing_an_empty_conversation_changes_nothing(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    await session.add_items(items(user("a")))
    await session.clear_session()
    await session.clear_session()
    assert len(await store.head_history(CHAT)) == 2
    assert len(await store.list()) == 2


async def test_pop_on_a_session_that_repeats_entry_ids(store: SessionStore) -> None:
    # Only a session written outside the adapter can repeat an id; a fork at
    # it would end at its first occurrence.
    await store.create(SessionMeta(id=CHAT))
    same = [MessageEntry(id="x", timestamp="t", message=Message.user(t)) for t in "abc"]
    await store.append_many(CHAT, [*same, MessageEntry.new(Message.user("d"))])
    session = StoreSession(store, CHAT)
    assert await session.pop_item() == user("d")
    assert await session.get_items() == [user("a"), user("b"), user("c")]
    assert await store.integrity() == []


async def test_popping_down_to_nothing_then_adding_again(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    given = items(user("a"), user("b"), user("c"))
    await session.add_items(given)
    assert [await session.pop_item() for _ in range(4)] == [*reversed(given), None]
    await session.add_items(given[:1])
    assert await session.get_items() == given[:1]
    assert len(await store.head_history(CHAT)) == 4


# ---------------------------------------------------------------- concurrency


async def test_concurrent_adds_on_one_object_all_land(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    batches = [items(user(f"{n}a"), user(f"{n}b")) for n in range(8)]
    await asyncio.gather(*(session.add_items(batch) for batch in batches))
    stored = await session.get_items()
    assert sorted(canonical(item) for item in stored) == sorted(
        canonical(item) for batch in batches for item in batch
    )
    for batch in batches:  # each call's items together
        at = stored.index(batch[0])
        assert stored[at : at + 2] == batch


async def test_concurrent_first_uses_from_many_objects_all_land(store: SessionStore) -> None:
    sessions = [StoreSession(store, CHAT) for _ in range(6)]
    await asyncio.gather(*(s.add_items(items(user(str(n)))) for n, s in enumerate(sessions)))
    assert sorted(canonical(i) for i in await sessions[0].get_items()) == sorted(
        canonical(user(str(n))) for n in range(6)
    )
    assert {move.session_id for move in await store.head_history(CHAT)} == {CHAT}


async def test_concurrent_pops_on_one_object_take_one_item_each(store: SessionStore) -> None:
    session = StoreSession(store, CHAT)
    given = items(*(user(str(n)) for n in range(5)))
    await session.add_items(given)
    popped = await asyncio.gather(*(session.pop_item() for _ in range(3)))
    assert sorted(canonical(p) for p in popped) == sorted(canonical(g) for g in given[2:])
    assert await session.get_items() == given[:2]


async def test_a_pop_racing_another_pop_takes_the_item_before(store: SessionStore) -> None:
    view, popper, other = await race(store)
    await other.add_items(items(user("u2")))
    taken: list[object] = []

    async def pop_first() -> None:
        taken.append(await other.pop_item())  # takes u2 after ``popper`` read it

    view.hooks["before set_head"] = pop_first
    taken.append(await popper.pop_item())
    assert taken == [user("u2"), user("a1")]  # one item each, never the same
    assert await other.get_items() == [user("u1")]


def test_objects_in_threads_each_running_its_own_loop_share_a_conversation(
    kind: str, store_targets: StoreTargets
) -> None:
    # What Runner.run_sync in worker threads does: an event loop per thread,
    # one store object shared by them all, a session object each.
    store = asyncio.run(open_store(store_targets.new(kind)))
    errors: list[BaseException] = []

    async def work(name: str) -> None:
        session = StoreSession(store, CHAT)
        for n in range(5):
            await session.add_items(items(user(f"{name}-{n}a"), user(f"{name}-{n}b")))
            if n % 2:
                assert await session.pop_item() is not None

    def run(name: str) -> None:
        try:
            asyncio.run(work(name))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)  # a guard against a hang, never reached when it works
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    current = asyncio.run(StoreSession(store, CHAT).get_items())
    assert len(current) == 4 * (5 * 2 - 2)  # each thread added ten items and popped two
    assert len({canonical(item) for item in current}) == len(current)
    assert asyncio.run(store.integrity()) == []
    asyncio.run(store.close())


Hook = Callable[[], Awaitable[object]]


class Interleaved:
    """A store that runs a hook once around its next call of a method
    (``hooks["before create"]``, ``hooks["after append_many"]``): another
    writer's move landing in the adapter's race window."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.hooks: dict[str, Hook] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        before = self.hooks.pop(f"before {name}", None)
        after = self.hooks.pop(f"after {name}", None)
        if before is None and after is None:
            return method

        async def hooked(*args: Any, **kwargs: Any) -> Any:
            if before is not None:
                await before()
            result = await method(*args, **kwargs)
            if after is not None:
                await after()
            return result

        return hooked


async def race(store: SessionStore) -> tuple[Interleaved, StoreSession, StoreSession]:
    """A conversation of two items, an adder on an interleaved view of the
    store, and another object on the plain store."""
    other = StoreSession(store, CHAT)
    await other.add_items(items(user("u1"), user("a1")))
    view = Interleaved(store)
    return view, StoreSession(cast(SessionStore, view), CHAT), other


async def test_a_pop_between_the_head_read_and_the_append(store: SessionStore) -> None:
    view, adder, other = await race(store)
    view.hooks["before append_many"] = other.pop_item  # it pops a1 without seeing u2
    await adder.add_items(items(user("u2")))
    assert await other.get_items() == [user("u1"), user("u2")]
    assert await store.integrity() == []


async def test_a_pop_of_the_items_just_appended_keeps_them_popped(store: SessionStore) -> None:
    view, adder, other = await race(store)
    popped: list[object] = []

    async def pop() -> None:
        popped.append(await other.pop_item())

    view.hooks["after append_many"] = (
        pop  # it sees u2 and pops it, before the adder checks the head
    )
    await adder.add_items(items(user("u2")))
    assert popped == [user("u2")]
    assert await other.get_items() == [user("u1"), user("a1")]


async def test_a_pop_of_the_first_items_appended_keeps_them_popped(store: SessionStore) -> None:
    view = Interleaved(store)
    adder, other = StoreSession(cast(SessionStore, view), CHAT), StoreSession(store, CHAT)
    popped: list[object] = []

    async def pop() -> None:
        popped.append(await other.pop_item())

    view.hooks["after append_many"] = pop  # the conversation's very first item, popped at once
    await adder.add_items(items(user("u1")))
    assert popped == [user("u1")]
    assert await other.get_items() == []


async def test_a_first_use_racing_one_that_already_moved_the_head(store: SessionStore) -> None:
    view = Interleaved(store)
    late, other = StoreSession(cast(SessionStore, view), CHAT), StoreSession(store, CHAT)

    async def start_and_pop() -> None:
        await other.add_items(items(user("u1"), user("a1")))
        await other.pop_item()

    # ``late`` found no head; before it creates the first session, ``other``
    # creates it, and pops: ``late`` follows the head, never sets it back.
    view.hooks["before create"] = start_and_pop
    await late.add_items(items(user("u2")))
    assert await other.get_items() == [user("u1"), user("u2")]
    assert len(await store.head_history(CHAT)) == 2


async def test_a_clear_before_the_append_leaves_the_items_on_the_new_session(
    store: SessionStore,
) -> None:
    view, adder, other = await race(store)
    view.hooks["before append_many"] = other.clear_session
    await adder.add_items(items(user("late")))
    assert await other.get_items() == [user("late")]
    assert await store.integrity() == []


async def test_a_clear_after_the_append_clears_the_items_too(store: SessionStore) -> None:
    view, adder, other = await race(store)
    first = await other.current_session()
    view.hooks["after append_many"] = other.clear_session  # it reads them: it clears them
    await adder.add_items(items(user("added")))
    assert await other.get_items() == []
    assert first is not None
    assert [message.text() for message in await store.load_context(first)][-1] == "added"


async def test_the_adder_follows_the_head_through_several_moves(store: SessionStore) -> None:
    view, adder, other = await race(store)

    async def pop_twice() -> None:
        await other.pop_item()
        await other.pop_item()

    view.hooks["before append_many"] = pop_twice
    await adder.add_items(items(user("u2"), user("a2")))
    assert await other.get_items() == [user("u2"), user("a2")]


# ------------------------------------------------------------- the object itself


async def test_it_is_an_openai_agents_session() -> None:
    async with StoreSession.open("memory://", CHAT) as session:
        typed: Session = session
        assert isinstance(typed, Session)
        assert session.session_id == CHAT
        assert session.session_settings == SessionSettings()  # as the framework's own sessions


async def test_session_settings_given_as_a_dict_are_normalised(store: SessionStore) -> None:
    session = StoreSession(store, CHAT, session_settings={"limit": 2})
    assert session.session_settings == SessionSettings(limit=2)
    await session.add_items(items(*(user(str(n)) for n in range(4))))
    assert await session.get_items() == items(user("2"), user("3"))


async def test_open_owns_its_store_and_a_given_store_stays_open(tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'chat.db'}"
    async with StoreSession.open(target, CHAT) as session:
        await session.add_items(items(user("hi")))
    opened = await StoreSession.open(target, CHAT)
    assert await opened.get_items() == [user("hi")]
    await opened.close()
    async with open_store(target) as store:
        async with StoreSession(store, CHAT) as borrowed:
            assert await borrowed.get_items() == [user("hi")]
        assert await store.head(CHAT) == CHAT  # still open
