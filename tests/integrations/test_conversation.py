"""A conversation's turn input: the head read once, then guessed, and a
guess never taken for where a resume is told."""

from __future__ import annotations

from sessionstore import MemoryStore, Message, MessageEntry, SessionMeta
from sessionstore.integrations.conversation import Conversation


class _HeadReads(MemoryStore):
    """A memory store counting its head reads."""

    def __init__(self) -> None:
        super().__init__()
        self.head_reads = 0

    async def head(self, name: str) -> str | None:
        self.head_reads += 1
        return await super().head(name)


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
