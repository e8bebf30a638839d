"""`StoreSaver`: a LangGraph thread kept as a session, its checkpoints as keyed lines."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import require

require("langgraph", "langgraph")

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

import sessionstore.integrations.langgraph_writes as langgraph_writes
from sessionstore import (
    ConfigurationError,
    EncryptionKeyError,
    InvalidRecordError,
    InvalidSessionIdError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    decode_entry,
    decode_meta,
    generate_key,
    open_store,
)
from sessionstore.archive import export_archive
from sessionstore.cli import main
from sessionstore.integrations.conversation import first_id
from sessionstore.integrations.langchain import to_message
from sessionstore.integrations.langgraph import StoreSaver
from sessionstore.sync import open_store as open_sync_store
from tests.kinds import PERSISTENT_KINDS, TEST_KEYS, StoreTargets

TEXT = "x" * 200


def echo(state: MessagesState) -> dict[str, list[AnyMessage]]:
    return {"messages": [AIMessage(content=f"echo {state['messages'][-1].content}")]}


def chat(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=saver)


def thread(name: str = "chat-42") -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


async def turns(
    graph: CompiledStateGraph[Any, Any, Any, Any], count: int, name: str = "chat-42"
) -> None:
    for number in range(count):
        said = HumanMessage(content=f"turn {number} {TEXT}")
        await graph.ainvoke({"messages": [said]}, thread(name))


def said(messages: Sequence[BaseMessage]) -> list[tuple[str, Any]]:
    """What a list says, without the ids each run draws anew."""
    return [(message.type, message.content) for message in messages]


async def messages_of(store: SessionStore, session_id: str) -> list[str]:
    return [
        entry.message.text()
        for entry in await store.load(session_id)
        if isinstance(entry, MessageEntry)
    ]


@pytest.fixture
async def store(kind: str, store_targets: StoreTargets) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(kind)) as opened:
        yield opened


# ---------------------------------------------------------------- mapping


async def test_a_thread_is_a_session_holding_each_message_once(store: SessionStore) -> None:
    graph = chat(StoreSaver(store))
    await turns(graph, 5)
    # The head named after the thread names a session holding the conversation.
    session = await store.head("chat-42")
    assert session == "chat-42"
    texts = await messages_of(store, session)
    assert len(texts) == 10
    assert texts[:2] == [f"turn 0 {TEXT}", f"echo turn 0 {TEXT}"]
    # Every message is stored once: no journal line of the thread holds one
    # (pending writes aside: they hold the step's own output, once).
    data = await store.journal("langgraph:chat-42").read_bytes()
    checkpoints = [line for line in data.split(b"\n") if line.startswith(b'{"key":"c/')]
    assert checkpoints
    assert not any(b"turn 0" in line for line in checkpoints)


async def test_the_state_is_the_one_langgraph_s_own_saver_keeps(store: SessionStore) -> None:
    ours, theirs = chat(StoreSaver(store)), chat(InMemorySaver())
    await turns(ours, 4)
    await turns(theirs, 4)
    mine, reference = await ours.aget_state(thread()), await theirs.aget_state(thread())
    assert said(mine.values["messages"]) == said(reference.values["messages"])
    history = [
        said(state.values.get("messages", [])) async for state in ours.aget_state_history(thread())
    ]
    expected = [
        said(state.values.get("messages", []))
        async for state in theirs.aget_state_history(thread())
    ]
    assert history == expected


@pytest.mark.parametrize("persistent", PERSISTENT_KINDS)
async def test_a_new_saver_reads_what_another_wrote(
    persistent: str, store_targets: StoreTargets
) -> None:
    target = store_targets.new(persistent)
    async with open_store(target) as first:
        await turns(chat(StoreSaver(first)), 3)
    async with open_store(target) as second:
        state = await chat(StoreSaver(second)).aget_state(thread())
    assert len(state.values["messages"]) == 6


async def test_subgraph_namespaces_are_sessions_of_their_own(store: SessionStore) -> None:
    saver = StoreSaver(store)
    for ns in ("", "inner:1"):
        config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
        said_there = [HumanMessage(content=f"in {ns or 'root'}", id="m1")]
        made = checkpoint(f"1f0000000000000{len(ns)}", said_there)
        await saver.aput(config, made, {}, made["channel_versions"])
    assert await messages_of(store, "t") == ["in root"]
    assert await messages_of(store, "t|inner:1") == ["in inner:1"]
    # A namespace too long for a session id names its conversation by a digest.
    deep = "|".join(f"node{n}:{'f' * 36}" for n in range(8))
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": deep}}
    made = checkpoint("1f0000000000000z", [HumanMessage(content="deep", id="m1")])
    stored = await saver.aput(config, made, {}, made["channel_versions"])
    got = await saver.aget_tuple(stored)
    assert got is not None
    assert said(got.checkpoint["channel_values"]["messages"]) == [("human", "deep")]
    [named] = [name for name in await store.heads() if name.startswith("t|#")]
    assert await messages_of(store, str(await store.head(named))) == ["deep"]


def test_the_cli_search_and_export_see_the_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "sessions.db")
    with open_sync_store(db) as store:
        graph = chat(StoreSaver(store))
        for number in range(3):  # blocking invoke: the saver's blocking twins
            graph.invoke({"messages": [HumanMessage(content=f"zebra {number}")]}, thread())
        hits = store.search("zebra")
        assert {hit.session_id for hit in hits} == {"chat-42"}
        store.run(lambda async_store: export_archive(async_store, tmp_path / "archive"))
    assert main(["--db", db, "show", "chat-42"]) == 0
    shown = capsys.readouterr().out
    assert "zebra 0" in shown
    assert "echo zebra 2" in shown
    assert main(["--db", db, "html", "chat-42"]) == 0
    assert "echo zebra 2" in capsys.readouterr().out
    # The exported session file is a plain session file: a header, then
    # one entry per message, each line as the Rust reader takes it.
    lines = (tmp_path / "archive" / "sessions" / "chat-42.jsonl").read_bytes().splitlines()
    assert decode_meta(lines[0]).id == "chat-42"
    entries = [decode_entry(line) for line in lines[1:]]
    assert [entry.message.role for entry in entries if isinstance(entry, MessageEntry)] == [
        "user",
        "assistant",
    ] * 3


# ---------------------------------------------------------------- divergence


async def test_time_travel_forks_the_session_where_it_resumes(store: SessionStore) -> None:
    graph = chat(StoreSaver(store))
    await turns(graph, 3)
    history = [state async for state in graph.aget_state_history(thread())]
    back = next(state for state in history if len(state.values.get("messages", [])) == 2)
    await graph.ainvoke({"messages": [HumanMessage(content="instead")]}, back.config)
    forked = await store.head("chat-42")
    assert forked is not None
    assert forked != "chat-42"
    assert (await messages_of(store, forked))[2:] == ["instead", "echo instead"]
    assert len(await messages_of(store, "chat-42")) == 6  # the original stays whole
    meta = next(meta for meta in await store.list() if meta.id == forked)
    assert meta.parent_session == "chat-42"
    state = await graph.aget_state(thread())
    assert [m.content for m in state.values["messages"]][2:] == ["instead", "echo instead"]


async def test_a_removed_message_forks_before_it(store: SessionStore) -> None:
    graph = chat(StoreSaver(store))
    await turns(graph, 2)
    state = await graph.aget_state(thread())
    second = state.values["messages"][1]
    await graph.aupdate_state(thread(), {"messages": [RemoveMessage(id=second.id)]})
    forked = await store.head("chat-42")
    assert forked is not None
    assert forked != "chat-42"
    assert await messages_of(store, forked) == [
        f"turn 0 {TEXT}",
        f"turn 1 {TEXT}",
        f"echo turn 1 {TEXT}",
    ]
    after = await graph.aget_state(thread())
    assert [m.id for m in after.values["messages"]] == [
        m.id for m in state.values["messages"] if m.id != second.id
    ]


async def test_a_message_replaced_by_id_forks_before_it(store: SessionStore) -> None:
    graph = chat(StoreSaver(store))
    await turns(graph, 2)
    state = await graph.aget_state(thread())
    last = state.values["messages"][-1]
    await graph.aupdate_state(thread(), {"messages": [AIMessage(content="amended", id=last.id)]})
    forked = await store.head("chat-42")
    assert forked is not None
    assert forked != "chat-42"
    assert (await messages_of(store, forked))[-1] == "amended"
    assert (await messages_of(store, "chat-42"))[-1] == f"echo turn 1 {TEXT}"


# ---------------------------------------------------------------- concurrency


def checkpoint(checkpoint_id: str, messages: Sequence[BaseMessage]) -> Checkpoint:
    """A checkpoint whose messages channel holds ``messages``, as a graph puts one."""
    return Checkpoint(
        v=1,
        id=checkpoint_id,
        ts="2026-01-01T00:00:00+00:00",
        channel_values={"messages": list(messages)},
        channel_versions={"messages": f"2.{checkpoint_id}"},
        versions_seen={},
        updated_channels=None,
    )


async def test_two_stores_putting_children_of_one_parent_keep_both(
    store_targets: StoreTargets,
) -> None:
    target = store_targets.new("sqlite")
    async with open_store(target) as one, open_store(target) as two:
        first, second = StoreSaver(one), StoreSaver(two)
        root = HumanMessage(content="root", id="r")
        config = await first.aput(
            thread("t"),
            checkpoint("1f0000000000000a", [root]),
            {},
            {"messages": "1"},
        )
        left: list[BaseMessage] = [root, AIMessage(content="left", id="l")]
        right: list[BaseMessage] = [
            root,
            AIMessage(content="right", id="r2"),
            HumanMessage(content="more", id="m"),
        ]
        stored = await asyncio.gather(
            first.aput(config, checkpoint("1f0000000000000b", left), {}, {"messages": "2.b"}),
            second.aput(config, checkpoint("1f0000000000000c", right), {}, {"messages": "2.c"}),
        )
        for saver in (StoreSaver(one), StoreSaver(two)):
            for put, wanted in zip(stored, (left, right), strict=True):
                got = await saver.aget_tuple(put)
                assert got is not None
                assert said(got.checkpoint["channel_values"]["messages"]) == said(wanted)
        # Each child's messages are in a session of their own, never interleaved.
        sessions = {meta.id for meta in await one.list()}
        contents = sorted([await messages_of(one, session) for session in sessions])
        assert contents == [["root", "left"], ["root", "right", "more"]]


# ---------------------------------------------------------------- errors


async def test_a_value_that_cannot_be_serialized_stores_nothing(store: SessionStore) -> None:
    saver = StoreSaver(store)
    made = checkpoint("1f0000000000000a", [HumanMessage(content="hi", id="h")])
    made["channel_values"]["other"] = object()
    made["channel_versions"]["other"] = "1"
    with pytest.raises(InvalidRecordError, match="thread 't', checkpoint '1f0000000000000a'"):
        await saver.aput(thread("t"), made, {}, {"messages": "1", "other": "1"})
    assert await saver.aget_tuple(thread("t")) is None
    assert await store.list() == []


async def test_a_line_too_long_stores_nothing(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(langgraph_writes, "MAX_LINE", 2000)
    saver = StoreSaver(store)
    made = checkpoint("1f0000000000000a", [HumanMessage(content="hi", id="h")])
    made["channel_values"]["big"] = os.urandom(4000).hex()  # compresses to no less
    made["channel_versions"]["big"] = "1"
    with pytest.raises(InvalidRecordError, match="thread 't', checkpoint '1f0000000000000a'"):
        await saver.aput(thread("t"), made, {}, {"messages": "1", "big": "1"})
    assert await saver.aget_tuple(thread("t")) is None
    assert await store.list() == []


async def test_a_task_s_writes_are_stored_all_or_none(store: SessionStore) -> None:
    saver = StoreSaver(store)
    made = checkpoint("1f0000000000000a", [HumanMessage(content="hi", id="h")])
    stored = await saver.aput(thread("t"), made, {}, made["channel_versions"])
    with pytest.raises(
        InvalidRecordError, match="thread 't', checkpoint '1f0000000000000a', task 'k'"
    ):
        await saver.aput_writes(stored, [("fine", 1), ("bad", object())], "k")
    got = await saver.aget_tuple(stored)
    assert got is not None
    assert got.pending_writes == []
    await saver.aput_writes(stored, [("fine", 1), ("also", 2)], "k")
    await saver.aput_writes(
        stored, [("fine", 3), ("also", 4)], "k"
    )  # a retried task: the first counts
    again = await saver.aget_tuple(stored)
    assert again is not None
    assert again.pending_writes == [("k", "fine", 1), ("k", "also", 2)]


async def test_a_checkpoint_whose_session_was_erased_by_hand_names_itself(
    store: SessionStore,
) -> None:
    await turns(chat(StoreSaver(store)), 1)
    await store.erase("chat-42", reason="by hand, outside the saver")
    with pytest.raises(SessionNotFoundError, match=r"thread 'chat-42', checkpoint '.*chat-42"):
        await StoreSaver(store).aget_tuple(thread())


async def test_a_thread_id_that_names_no_journal_is_refused(store: SessionStore) -> None:
    with pytest.raises(InvalidSessionIdError, match="a/b"):
        await StoreSaver(store).aget_tuple(thread("a/b"))


async def test_blocking_calls_on_an_async_store_say_what_to_do(store: SessionStore) -> None:
    with pytest.raises(ConfigurationError, match="async store"):
        StoreSaver(store).get_tuple(thread())


async def test_an_encrypted_serializer_works(store: SessionStore) -> None:
    key = AESGCM.generate_key(bit_length=128)

    class Cipher:
        def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
            nonce = os.urandom(12)
            return "aesgcm", nonce + AESGCM(key).encrypt(nonce, plaintext, None)

        def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
            return AESGCM(key).decrypt(ciphertext[:12], ciphertext[12:], None)

    graph = chat(StoreSaver(store, serde=EncryptedSerializer(Cipher())))
    await turns(graph, 2)
    state = await graph.aget_state(thread())
    assert len(state.values["messages"]) == 4
    data = await store.journal("langgraph:chat-42").read_bytes()
    assert b"aesgcm" in data
    assert b"turn 0" not in data


# ---------------------------------------------------------------- retention


async def test_deleting_a_thread_erases_its_sessions_and_journal_on_record(
    store: SessionStore,
) -> None:
    saver = StoreSaver(store)
    graph = chat(saver)
    await turns(graph, 2)
    await turns(graph, 1, name="other")
    state = await graph.aget_state(thread())
    await graph.aupdate_state(  # a fork: the thread holds two sessions
        thread(), {"messages": [RemoveMessage(id=state.values["messages"][0].id)]}
    )
    sessions = {meta.id for meta in await store.list()} - {"other"}
    assert len(sessions) == 2
    await saver.adelete_thread("chat-42")
    assert await saver.aget_tuple(thread()) is None
    assert {meta.id for meta in await store.list()} == {"other"}
    erased = await store.erasures()
    assert {e.name for e in erased if e.kind == "session"} == sessions
    assert "langgraph:chat-42" in {e.name for e in erased if e.kind == "journal"}
    assert await store.journal("langgraph:chat-42").read_bytes() == b""
    assert len((await graph.aget_state(thread("other"))).values["messages"]) == 2
    await turns(graph, 1)  # the thread starts over, in a new first session
    assert said((await graph.aget_state(thread())).values["messages"])[0] == (
        "human",
        f"turn 0 {TEXT}",
    )
    assert len(await messages_of(store, "chat-42")) == 2


async def test_prune_keeps_the_latest_and_erases_what_it_does_not_need(
    store: SessionStore,
) -> None:
    saver = StoreSaver(store)
    graph = chat(saver)
    await turns(graph, 3)
    before = (await graph.aget_state(thread())).values["messages"]
    await saver.aprune(["chat-42"], strategy="keep_latest")
    listed = [each async for each in saver.alist(thread())]
    assert len(listed) == 1
    after = (await graph.aget_state(thread())).values["messages"]
    assert said(after) == said(before)
    dropped = [e for e in await store.erasures() if e.name == "langgraph:chat-42"]
    assert len(dropped) == 1
    assert dropped[0].keys is not None
    assert dropped[0].keys > 0
    # The thread goes on from what was kept.
    await turns(graph, 1)
    assert len((await graph.aget_state(thread())).values["messages"]) == 8


async def test_prune_erases_a_session_only_older_checkpoints_held(
    kind: str, store: SessionStore
) -> None:
    saver = StoreSaver(store)
    graph = chat(saver)
    await turns(graph, 2)
    state = await graph.aget_state(thread())
    await graph.aupdate_state(
        thread(), {"messages": [RemoveMessage(id=state.values["messages"][-1].id)]}
    )
    forked = await store.head("chat-42")
    await saver.aprune(["chat-42"], strategy="keep_latest")
    erased = {e.name for e in await store.erasures() if e.kind == "session"}
    if kind in ("sqlite", "postgresql"):
        # The fork shares the first session's entries there: it stays.
        assert erased == set()
    else:
        assert erased == {"chat-42"}
    assert {meta.id for meta in await store.list()} >= {forked}
    assert len((await graph.aget_state(thread())).values["messages"]) == 3


async def test_delete_for_runs_erases_the_checkpoints_of_a_run(store: SessionStore) -> None:
    saver = StoreSaver(store)
    graph = chat(saver)
    for run in ("first", "second"):  # a run's id, as LangGraph's server puts it in the metadata
        config: RunnableConfig = {**thread(), "metadata": {"run_id": run}}
        await graph.ainvoke({"messages": [HumanMessage(content=run)]}, config)
    await saver.adelete_for_runs(["first"])
    left = [each async for each in saver.alist(thread())]
    assert left
    assert {each.metadata.get("run_id") for each in left} == {"second"}
    dropped = [e.name for e in await store.erasures() if e.kind == "journal"]
    assert dropped == ["langgraph:chat-42", "langgraph"]  # the run's lines, then its index
    assert said((await graph.aget_state(thread())).values["messages"])[-1] == ("ai", "echo second")


# ---------------------------------------------------------------- cost


async def test_a_turn_converts_only_the_messages_it_adds(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sessionstore.integrations.langgraph_messages as messages_module

    converted: list[BaseMessage] = []
    original = to_message

    def counting(message: BaseMessage) -> Any:
        converted.append(message)
        return original(message)

    graph = chat(StoreSaver(store))
    await turns(graph, 20)
    monkeypatch.setattr(messages_module, "to_message", counting)
    await turns(graph, 1)
    assert len(converted) == 2  # the turn's question and answer, whatever came before


class Counting:
    """A store that counts the entries its reads hand back."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.read = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def load_slice(
        self, session_id: str, start: int = 0, stop: int | None = None, **expect: Any
    ) -> Any:
        got = await self.store.load_slice(session_id, start, stop, **expect)
        self.read += len(got.entries)
        return got


async def test_listing_checkpoints_reads_their_session_once(store: SessionStore) -> None:
    await turns(chat(StoreSaver(store)), 30)
    counting: Any = Counting(store)
    saver = StoreSaver(counting)  # a saver that kept nothing yet
    listed = [each async for each in saver.alist(thread(), limit=10)]
    assert [len(each.checkpoint["channel_values"]["messages"]) for each in listed[:3]] == [
        60,
        59,
        58,
    ]
    assert counting.read == 60  # the session, once, for all ten
    assert [each async for each in saver.alist(thread(), limit=10)] == listed
    assert await saver.aget_tuple(thread()) == listed[0]
    assert counting.read == 60  # read again from what was kept


def test_a_compressed_value_reads_back_and_a_forged_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import base64
    import zlib

    import sessionstore.integrations.langgraph_records as records

    said = ("msgpack", b"the same words again " * 40)
    kept = records.typed_value(said)
    assert kept[2:] == ["zlib"]
    assert records.typed_of(kept, "here") == said
    monkeypatch.setattr(records, "UNCOMPRESSED_MAX", 10_000)
    bomb = base64.b64encode(zlib.compress(b"\0" * 10_001)).decode()
    with pytest.raises(InvalidRecordError, match="here"):
        records.typed_of(["msgpack", bomb, "zlib"], "here")


PUTTER = Path(__file__).parents[1] / "workers" / "langgraph_putter.py"


@pytest.mark.parametrize("persistent", ["sqlite", "postgresql"])
async def test_two_processes_driving_one_thread_lose_no_checkpoint_and_mix_no_steps(
    persistent: str, store_targets: StoreTargets
) -> None:
    target = store_targets.new(persistent)
    root = Path(__file__).parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(PUTTER),
            target,
            "t",
            worker,
            "12",
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        for worker in ("a", "b")
    ]
    outputs = await asyncio.gather(*(worker.communicate() for worker in workers))
    assert [worker.returncode for worker in workers] == [0, 0]
    acknowledged = [line.decode() for out, _ in outputs for line in out.split()]
    assert len(acknowledged) == 24
    async with open_store(target) as store:
        saver = StoreSaver(store)
        for checkpoint_id in acknowledged:
            config: RunnableConfig = {
                "configurable": {"thread_id": "t", "checkpoint_id": checkpoint_id}
            }
            got = await saver.aget_tuple(config)
            assert got is not None, checkpoint_id
            texts = [m.content for m in got.checkpoint["channel_values"]["messages"]]
            # Each step's question is followed by its own answer: no step mixed into another.
            assert texts[1::2] == [f"answer {question}" for question in texts[0::2]]
            assert len(texts) == 2 * len(set(texts[0::2]))
        for meta in await store.list():  # and so is every session
            texts = await messages_of(store, meta.id)
            assert texts[1::2] == [f"answer {question}" for question in texts[0::2]]


async def test_a_copied_thread_forks_its_sessions_and_outlives_the_source(
    kind: str, store: SessionStore
) -> None:
    saver = StoreSaver(store)
    graph = chat(saver)
    await turns(graph, 2)
    await saver.acopy_thread("chat-42", "copy")
    copied = await store.head("copy")
    assert copied is not None
    meta = next(meta for meta in await store.list() if meta.id == copied)
    assert meta.parent_session == "chat-42"  # a fork: on SQL the history is shared, not copied
    await turns(graph, 1, name="copy")
    await saver.adelete_thread("chat-42")
    assert await saver.aget_tuple(thread()) is None
    assert len((await graph.aget_state(thread("copy"))).values["messages"]) == 6
    erased = {e.name for e in await store.erasures() if e.kind == "session"}
    # On SQL the copy's fork shares the source's entries: that session stays.
    assert erased == (set() if kind in ("sqlite", "postgresql") else {"chat-42"})


async def test_listing_without_a_config_lists_every_thread(store: SessionStore) -> None:
    saver = StoreSaver(store)
    graph = chat(saver)
    await turns(graph, 1, name="one")
    await turns(graph, 1, name="two")
    listed = [each async for each in saver.alist(None)]
    assert {each.config["configurable"]["thread_id"] for each in listed} == {"one", "two"}
    assert len([each async for each in saver.alist(None, limit=2)]) == 2


async def test_an_unknown_prune_strategy_is_refused(store: SessionStore) -> None:
    with pytest.raises(ConfigurationError, match="'keep_latest' and 'delete'"):
        await StoreSaver(store).aprune(["t"], strategy="everything")


async def test_another_channel_can_be_the_session_s_messages(store: SessionStore) -> None:
    saver = StoreSaver(store, messages_channel="history")
    made = checkpoint("1f0000000000000a", [])
    made["channel_values"] = {"history": [HumanMessage(content="kept", id="k")], "messages": ["x"]}
    made["channel_versions"] = {"history": "1", "messages": "1"}
    stored = await saver.aput(thread("t"), made, {}, made["channel_versions"])
    assert await messages_of(store, "t") == ["kept"]
    got = await saver.aget_tuple(stored)
    assert got is not None
    assert got.checkpoint["channel_values"]["messages"] == ["x"]  # a value like any other
    assert said(got.checkpoint["channel_values"]["history"]) == [("human", "kept")]


async def test_a_session_of_the_thread_s_name_held_by_another_is_never_erased(
    store: SessionStore,
) -> None:
    other = SessionMeta.new().model_copy(update={"id": "chat-42"})
    await store.create(other)
    await store.append("chat-42", MessageEntry.new(Message.user("not the graph's")))
    saver = StoreSaver(store)
    await turns(chat(saver), 1)
    ours = await store.head("chat-42")
    assert ours is not None
    assert ours != "chat-42"  # the graph's conversation went to a session of its own
    await saver.adelete_thread("chat-42")
    assert await messages_of(store, "chat-42") == ["not the graph's"]
    assert {e.name for e in await store.erasures() if e.kind == "session"} == {ours}


async def test_a_first_session_made_but_not_noted_is_erased_with_its_thread(
    store: SessionStore,
) -> None:
    saver = StoreSaver(store)
    await turns(chat(saver), 1, name="other")
    made = SessionMeta.new(metadata={"langgraph": {"thread": "chat-42", "ns": ""}})
    await store.create(made.model_copy(update={"id": "chat-42"}))  # a crash before its note
    await saver.adelete_thread("chat-42")
    assert "chat-42" not in {meta.id for meta in await store.list()}


async def test_two_tenants_threads_of_one_id_tell_each_other_nothing(
    store: SessionStore,
) -> None:
    alice, bob = store.scoped("alice"), store.scoped("bob")  # type: ignore[attr-defined]
    await turns(chat(StoreSaver(alice)), 1)
    before = {meta.id: meta.owner for meta in await store.list()}
    await turns(chat(StoreSaver(bob)), 1)
    # Each first session is the owner's prefix + the thread id: bob's is made
    # as it would be had alice no thread, and names nothing of hers.
    assert await alice.head("chat-42") == first_id(alice, "chat-42")
    assert await bob.head("chat-42") == first_id(bob, "chat-42")
    assert "chat-42" not in before
    assert [m.content for m in await bob.load_context(first_id(bob, "chat-42"))] == [
        f"turn 0 {TEXT}",
        f"echo turn 0 {TEXT}",
    ]
    await StoreSaver(bob).adelete_thread("chat-42")
    assert {meta.id: meta.owner for meta in await store.list()} == before


async def test_a_tenant_s_first_session_made_but_not_noted_is_erased_with_its_thread(
    store: SessionStore,
) -> None:
    view = store.scoped("alice")  # type: ignore[attr-defined]
    saver = StoreSaver(view)
    await turns(chat(saver), 1, name="other")
    made = SessionMeta.new(metadata={"langgraph": {"thread": "chat-42", "ns": ""}})
    await view.create(made.model_copy(update={"id": first_id(view, "chat-42")}))
    await saver.adelete_thread("chat-42")
    assert first_id(view, "chat-42") not in {meta.id for meta in await store.list()}


async def test_a_sealed_store_without_its_current_key_stores_nothing(
    store_targets: StoreTargets,
) -> None:
    target, options = store_targets.new("sqlite-sealed"), store_targets.options("sqlite-sealed")
    new_key = generate_key()
    async with open_store(target, **options) as old:
        rotating = {**options, "keys": [new_key, *TEST_KEYS]}
        async with open_store(target, **rotating) as rotated:
            await rotated.rotate_keys()  # type: ignore[attr-defined]
        # The first store still holds only the retired key: it seals nothing new.
        saver = StoreSaver(old)
        made = checkpoint("1f0000000000000a", [HumanMessage(content="hi", id="h")])
        with pytest.raises(
            EncryptionKeyError, match="thread 'fresh', checkpoint '1f0000000000000a'"
        ):
            await saver.aput(thread("fresh"), made, {}, made["channel_versions"])
    async with open_store(target, **{**options, "keys": [new_key]}) as reopened:
        assert await StoreSaver(reopened).aget_tuple(thread("fresh")) is None
        assert await reopened.list() == []


async def test_what_a_saver_keeps_listed_is_bounded(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sessionstore.integrations.langgraph_messages as messages_module

    monkeypatch.setattr(messages_module, "RECENT_MESSAGES", 10)
    saver = StoreSaver(store)
    graph = chat(saver)
    await turns(graph, 3, name="first")
    assert saver.kept_messages == 6
    await turns(graph, 3, name="second")
    assert saver.kept_messages == 6  # the first thread's list went
    assert len((await graph.aget_state(thread("first"))).values["messages"]) == 6
    saver.drop_caches()
    assert saver.kept_messages == 0


async def test_a_checkpoint_s_other_fields_come_back(store: SessionStore) -> None:
    saver = StoreSaver(store)
    plain = checkpoint("1f0000000000000a", [])
    plain["updated_channels"] = ["messages"]
    older: Any = {**checkpoint("1f0000000000000b", []), "pending_sends": [["node", {"x": 1}]]}
    for made in (plain, older):
        stored = await saver.aput(thread("t"), made, {}, made["channel_versions"])
        got = await saver.aget_tuple(stored)
        assert got is not None
        rest = {k: v for k, v in got.checkpoint.items() if k != "channel_values"}
        assert rest == {k: v for k, v in made.items() if k != "channel_values"}
