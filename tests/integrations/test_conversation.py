"""A conversation's turn input and reads: the head read once, then guessed
(each step stating it), the end an append left known, and neither guess
ever taken for where a resume is told."""

from __future__ import annotations

from typing import Any

import pytest

from sessionstore import (
    EntrySlice,
    MemoryStore,
    Message,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
)
from sessionstore.integrations.conversation import Conversation


class _HeadReads(MemoryStore):
    """A memory store counting its head reads and its slices read."""

    def __init__(self) -> None:
        super().__init__()
        self.head_reads = 0
        self.slices: list[str | None] = []  # each slice's expect_head

    async def head(self, name: str) -> str | None:
        self.head_reads += 1
        return await super().head(name)

    async def load_slice(
        self, session_id: str, start: int = 0, stop: int | None = None, **expect: Any
    ) -> EntrySlice:
        self.slices.append(expect.get("expect_head"))
        return await super().load_slice(session_id, start, stop, **expect)


def _texts(entries: list[Any]) -> list[Any]:
    return [entry.message.content for entry in entries]


def _user(text: str) -> list[MessageEntry]:
    return [MessageEntry.new(Message.user(text))]


def _answer(text: str) -> list[MessageEntry]:
    return [MessageEntry.new(Message.assistant(text))]


async def test_a_turn_input_after_the_first_reads_no_head() -> None:
    store = _HeadReads()
    chat = Conversation(store, "chat", first_id="chat")
    assert await chat.add_input(_user("hello"))
    await chat.add(_answer("hi"))
    before = store.head_reads
    assert await chat.add_input(_user("how are you?"))
    assert store.head_reads == before  # where the head was seen, checked by the append
    texts = [entry.message.content for entry in await store.load("chat")]  # type: ignore[union-attr]
    assert texts == ["hello", "hi", "how are you?"]


async def test_a_head_moved_elsewhere_is_followed_and_no_resume_is_told_from_the_old_session() -> (
    None
):
    store = MemoryStore()
    chat = Conversation(store, "chat", first_id="chat")
    await chat.add(_answer("welcome"))
    assert await chat.add_input(_user("again"))  # an open turn: its input, no answer yet
    # Another process moves the head to a new session of its own.
    other = await store.create(SessionMeta(id="elsewhere"))
    await store.set_head("chat", other)
    # The same input sent again: the old session's open turn ends with it,
    # but the head stands elsewhere, so it is stored there.
    assert await chat.add_input(_user("again"))
    assert [entry.message.content for entry in await store.load(other)] == ["again"]  # type: ignore[union-attr]
    assert len(await store.load("chat")) == 2


async def test_a_turn_input_after_an_answer_is_one_append_and_no_read() -> None:
    store = _HeadReads()
    chat = Conversation(store, "chat", first_id="chat")
    assert await chat.add_input(_user("hello"))
    await chat.add(_answer("hi"))
    heads, slices = store.head_reads, len(store.slices)
    assert await chat.add_input(_user("how are you?"))  # the end known: the answer
    assert await chat.add_input(_user("and then?"))  # the end known: an input, not this one
    assert (store.head_reads, len(store.slices)) == (heads, slices)
    assert _texts(await store.load("chat")) == ["hello", "hi", "how are you?", "and then?"]


async def test_an_input_sent_again_is_stored_once_told_from_a_read() -> None:
    store = _HeadReads()
    chat = Conversation(store, "chat", first_id="chat")
    await chat.add(_answer("welcome"))
    question = _user("again")
    assert await chat.add_input(question)
    slices = len(store.slices)
    # A rerun sends the same input: the end this object knows says it is
    # stored, which only a read of the store where the head stands may tell.
    assert not await chat.add_input(question)
    assert len(store.slices) > slices
    assert _texts(await store.load("chat")) == ["welcome", "again"]


async def test_an_end_appended_to_by_another_writer_is_read_again() -> None:
    store = MemoryStore()
    chat = Conversation(store, "chat", first_id="chat")
    assert await chat.add_input(_user("q1"))
    await chat.add(_answer("a1"))
    # Another writer stores the same question after the end this object knows.
    other = Conversation(store, "chat", first_id="chat")
    assert await other.add_input(_user("q2"))
    # Its open turn begins with that input: a rerun of it, not stored twice.
    assert not await chat.add_input(_user("q2"))
    assert await chat.add_input(_user("q3"))
    assert _texts(await store.load("chat")) == ["q1", "a1", "q2", "q3"]


async def test_a_read_where_the_head_was_seen_is_one_step_and_follows_a_moved_head() -> None:
    store = _HeadReads()
    chat = Conversation(store, "chat", first_id="chat")

    calls: list[tuple[str, str | None]] = []

    async def last(session: str, head: str | None) -> list[Any]:
        calls.append((session, head))
        return _texts(list((await store.load_slice(session, -1, expect_head=head)).entries))

    assert await chat.read(last) is None  # before the first add
    await chat.add(_answer("hi"))
    heads = store.head_reads
    assert await chat.read(last) == ["hi"]
    # One read, stating the head: the memory store checks it with one head read.
    assert (calls, store.head_reads - heads) == ([("chat", "chat")], 1)
    moved = await store.create(SessionMeta(id="moved"))
    await store.append(moved, _answer("there")[0])
    await store.set_head("chat", moved)
    calls.clear()
    assert await chat.read(last) == ["there"]  # refused, then read where it stands
    assert await chat.read(last) == ["there"]
    assert calls == [("chat", "chat"), ("moved", "chat"), ("moved", "chat")]
    await store.erase("moved", reason="a test")
    calls.clear()
    with pytest.raises(SessionNotFoundError):  # as a read of the erased session, once asked
        await chat.read(last)
    assert calls == [("moved", "chat"), ("moved", None)]  # the guess, then where the head stands
