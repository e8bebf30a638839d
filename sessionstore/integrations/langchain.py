"""LangChain chat history kept in a session store.

`SessionStoreChatMessageHistory` is a LangChain ``BaseChatMessageHistory``
(what ``RunnableWithMessageHistory`` reads and writes) over a store::

    from sessionstore.integrations.langchain import SessionStoreChatMessageHistory
    from sessionstore.sync import open_store

    store = open_store("sessions.db")
    history = SessionStoreChatMessageHistory(store, "chat-42")

The conversation ``"chat-42"`` is a named head (`SessionStore.set_head`): the
session it names now holds the conversation. Messages go in with
``append_many``, one batch per call; what LangChain reads back is the
store's context (`SessionStore.load_context`), so a compaction appended to
the session shows as its summary, a `HumanMessage`, then the messages it
kept. ``clear`` deletes nothing: it starts an empty session whose
``parent_session`` is the old one and moves the head there.

Any number of histories, in any threads, event loops and processes, may
share one conversation: their adds and clears are conditional writes
(`sessionstore.integrations.conversation`), so each add lands whole on the
current session, and a clear racing an add either clears it (it read it)
or leaves it on the new session, never on the branch it left.

Sync or async: built on a `sessionstore.sync.SyncStore`, every method works
(the async ones run the blocking calls in a worker thread), so one history
serves a chain's ``invoke`` and ``ainvoke``. Built on an async
`SessionStore`, the async methods (``aget_messages``, ``aadd_messages``,
``aclear``: a chain's ``ainvoke``) await it on the caller's loop, and the
sync ones raise `ConfigurationError`: an async store lives on its event
loop and cannot be waited for from plain sync code.

Each message is stored as a `Message` a reader without LangChain
understands (role ``user``, ``assistant``, ``system``, ``tool``,
``function`` or a `ChatMessage`'s own; the content as LangChain holds it;
``tool_calls`` in the OpenAI shape, ``tool_call_id``, ``name``), plus the
field ``langchain``: LangChain's own serialization of the message (its
``type`` and ``data``, the content left out since it is stored once), from
which it comes back equal. Messages without that field (stored by other
code, or a compaction's summary) are mapped by role.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from operator import attrgetter
from typing import Any, TypeVar

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        InvalidToolCall,
        SystemMessage,
        ToolCall,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langchain_core.messages.tool import invalid_tool_call, tool_call
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.langchain needs langchain-core ({exc}): "
        "pip install 'sessionstore[langchain]'"
    ) from exc

from sessionstore import (
    ConfigurationError,
    Effect,
    EffectLog,
    Message,
    MessageEntry,
    SessionStore,
    validate_session_id,
)
from sessionstore.integrations.conversation import Conversation
from sessionstore.integrations.kept import KeptContext, Latest
from sessionstore.sync import SyncEffects, SyncStore

__all__ = [
    "LANGCHAIN_FIELD",
    "ChatHistories",
    "OnceTool",
    "SessionStoreChatMessageHistory",
    "from_context",
    "to_message",
]

LANGCHAIN_FIELD = "langchain"
"""The `Message` field holding LangChain's serialization of the message."""

# The namespace of the UUIDs of first sessions (`_first_session`).
_FIRST_SESSION = uuid.UUID("4f7c1a52-9d3e-4b8a-a6e1-2c5b0d9e7f31")

_Content = str | list[str | dict[str, Any]]
_T = TypeVar("_T")


class SessionStoreChatMessageHistory(BaseChatMessageHistory):
    """The messages of one conversation, kept in a session store.

    Args:
        store: a `sessionstore.sync.SyncStore` (every method works) or an
            async `SessionStore` (only the async methods work).
        name: the conversation: the name of the head that names its
            current session (the session-id rule applies). For
            ``RunnableWithMessageHistory``, its ``session_id``.

    Raises:
        InvalidSessionIdError: ``name`` breaks the session-id rule.
    """

    def __init__(self, store: SessionStore | SyncStore, name: str) -> None:
        super().__init__()
        self.store = store
        self.name = validate_session_id(name)
        # What this history's reads converted: the next read converts only
        # the messages added since (`sessionstore.integrations.kept`).
        self._kept = KeptContext(_from_context)
        # The conversation on the async store, made on first use: it
        # remembers the current session it last saw, where `add` appends.
        self._on: Conversation | None = None

    def __repr__(self) -> str:
        return f"SessionStoreChatMessageHistory({self.store!r}, {self.name!r})"

    @property
    def kept_count(self) -> int:
        """The context messages this history keeps converted between reads."""
        return self._kept.count

    @property
    def kept_weight(self) -> int:
        """The bytes those messages weigh (`sessionstore.integrations.kept.weight`)."""
        return self._kept.weight

    # ------------------------------------------------------------ sync

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation's context, compactions applied; empty before the first message."""
        return self._sync_store("messages").run(self._read)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages at the end of the conversation, all or none.

        The first call of a conversation creates its session and head.
        """
        entries = [MessageEntry.new(to_message(message)) for message in messages]
        if entries:
            self._sync_store("add_messages").run(partial(self._add, entries=entries))

    def clear(self) -> None:
        """Start the conversation over in a new, empty session.

        Nothing is deleted: the new session's ``parent_session`` is the old
        one, and the head moves to it (`SessionStore.head_history` keeps
        every earlier position). Nothing to do before the first message.
        """
        self._sync_store("clear").run(self._clear)

    # ------------------------------------------------------------ async

    async def aget_messages(self) -> list[BaseMessage]:
        """`messages`, awaited."""
        return await self._await(self._read)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """`add_messages`, awaited."""
        entries = [MessageEntry.new(to_message(message)) for message in messages]
        if entries:
            await self._await(partial(self._add, entries=entries))

    async def aclear(self) -> None:
        """`clear`, awaited."""
        await self._await(self._clear)

    # ------------------------------------------------------------ on the async store

    def _conversation(self, store: SessionStore) -> Conversation:
        on = self._on
        if on is None or on.store is not store:
            on = self._on = Conversation(store, self.name, first_id=_first_session_id(self.name))
        return on

    async def _read(self, store: SessionStore) -> list[BaseMessage]:
        session = await self._conversation(store).current()
        return [] if session is None else await self._kept.read(store, session)

    async def _add(self, store: SessionStore, *, entries: list[MessageEntry]) -> None:
        await self._conversation(store).add(entries)

    async def _clear(self, store: SessionStore) -> None:
        await self._conversation(store).clear()

    async def _await(self, call: Callable[[SessionStore], Awaitable[_T]]) -> _T:
        """``call`` on the async store: awaited here, or on a sync store's own
        loop from a worker thread (this loop is not held up meanwhile)."""
        store = self.store
        if isinstance(store, SyncStore):
            return await asyncio.to_thread(store.run, call)
        return await call(store)

    def _sync_store(self, method: str) -> SyncStore:
        if isinstance(self.store, SyncStore):
            return self.store
        raise ConfigurationError(
            f"{method} is a blocking call, and this history is built on an async store: "
            "await its async methods (aget_messages, aadd_messages, aclear; a chain's "
            "ainvoke), or build it on a sessionstore.sync store"
        )


class ChatHistories:
    """The histories of a store's conversations, each keeping what it converted.

    Give it to ``RunnableWithMessageHistory`` as ``get_session_history``,
    which asks for a history at every call::

        histories = ChatHistories(open_store("sessions.db"))
        chain = RunnableWithMessageHistory(runnable, histories)

    It hands out one history per conversation, the same object at every
    call, for the last `CONVERSATIONS` conversations used: so a turn reads
    only the messages added since the last one (what the history converted
    stays kept, `sessionstore.integrations.kept.KeptContext`), and an add
    appends to the session the turn's read found, without reading the head
    again. One history serves any number of calls at once, in any threads.

    Args:
        store: as for `SessionStoreChatMessageHistory`.
    """

    CONVERSATIONS = 256
    """Conversations whose histories are kept at most, the latest used (and
    at most `sessionstore.integrations.kept.KEPT_IN_ALL` bytes in all)."""

    def __init__(self, store: SessionStore | SyncStore) -> None:
        self.store = store
        self._histories: Latest[SessionStoreChatMessageHistory] = Latest(
            partial(SessionStoreChatMessageHistory, store),
            most=self.CONVERSATIONS,
            weigh=attrgetter("kept_weight"),
        )

    def __repr__(self) -> str:
        return f"ChatHistories({self.store!r})"

    def __call__(self, name: str) -> SessionStoreChatMessageHistory:
        """The history of conversation ``name``.

        Raises:
            InvalidSessionIdError: ``name`` breaks the session-id rule.
        """
        validate_session_id(name)
        return self._histories.get(name)


def _from_context(messages: Sequence[Message], before: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`from_context`, as `KeptContext` converts: a LangChain message needs
    nothing of those before it."""
    return from_context(messages)


def _first_session_id(name: str) -> str:
    """The id of a conversation's first session, derived from its name, so
    that histories starting one conversation at once share it."""
    return str(uuid.uuid5(_FIRST_SESSION, name))


# ---------------------------------------------------------------- messages


def to_message(message: BaseMessage) -> Message:
    """A LangChain message as the store keeps it; `from_context` gives it back equal.

    What is kept is LangChain's own serialization (``message_to_dict``), so
    a value JSON cannot carry (a NaN, a tuple, an object) is refused when
    the message is appended, never silently changed.
    """
    serialized = message_to_dict(message)
    data = {key: value for key, value in serialized["data"].items() if key != "content"}
    content = serialized["data"]["content"]
    fields: dict[str, Any] = {}
    if isinstance(message, AIMessage) and message.tool_calls:
        fields["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call["args"], ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        fields["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        fields["name"] = message.name
    fields[LANGCHAIN_FIELD] = {"type": serialized["type"], "data": data}
    return Message(role=_role(message), content=content, **fields)


def from_context(messages: Sequence[Message]) -> list[BaseMessage]:
    """LangChain messages from stored ones (`SessionStore.load_context` gives them).

    A message `to_message` made comes back equal to the one it was made
    from. Any other is mapped by role: ``user`` to a `HumanMessage` (a
    compaction's summary among them), ``assistant`` to an `AIMessage` (its
    OpenAI-shaped ``tool_calls`` as tool calls), ``system`` to a
    `SystemMessage`, ``tool`` to a `ToolMessage` (with its
    ``tool_call_id``), any other role to a `ChatMessage` of that role.
    """
    return [_from_message(message) for message in messages]


def _role(message: BaseMessage) -> str:
    # Chunks subclass their message classes, so they map alike.
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, FunctionMessage):
        return "function"
    if isinstance(message, ChatMessage):
        return message.role
    return message.type


def _from_message(message: Message) -> BaseMessage:
    stored = message.extra.get(LANGCHAIN_FIELD)
    if (
        isinstance(stored, dict)
        and isinstance(stored.get("type"), str)
        and isinstance(stored.get("data"), dict)
    ):
        data = {**stored["data"], "content": message.content}
        return messages_from_dict([{"type": stored["type"], "data": data}])[0]
    return _by_role(message)


def _by_role(message: Message) -> BaseMessage:
    """A message stored without LangChain's form of it, mapped by its role."""
    content = _content(message)
    name = message.extra.get("name")
    named: dict[str, Any] = {"name": name} if isinstance(name, str) else {}
    if message.role == "user":
        return HumanMessage(content=content, **named)
    if message.role == "system":
        return SystemMessage(content=content, **named)
    if message.role == "assistant":
        calls, invalid = _tool_calls(message.extra.get("tool_calls"))
        return AIMessage(content=content, tool_calls=calls, invalid_tool_calls=invalid, **named)
    if message.role == "tool":
        call_id = message.extra.get("tool_call_id")
        return ToolMessage(content=content, tool_call_id=str(call_id or ""), **named)
    return ChatMessage(role=message.role, content=content, **named)


def _content(message: Message) -> _Content:
    """The content as LangChain takes it: a string, or a list of strings and
    content blocks; anything else as its text."""
    content = message.content
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, str | dict) for part in content):
        return content
    return message.text()


def _tool_calls(calls: Any) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """OpenAI-shaped tool calls as LangChain's: valid ones, and those whose
    arguments are not a JSON object."""
    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        name, arguments = function.get("name"), function.get("arguments")
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError as exc:
            args, error = None, f"arguments are not JSON: {exc}"
        else:
            error = "arguments are not a JSON object" if isinstance(name, str) else "no name"
        if isinstance(args, dict) and isinstance(name, str):
            valid.append(tool_call(name=name, args=args, id=call_id))
            continue
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        invalid.append(
            invalid_tool_call(
                name=name if isinstance(name, str) else None, args=text, id=call_id, error=error
            )
        )
    return valid, invalid


_RECORDED_MESSAGE = "langchain_message"
"""How `OnceTool` records a message a tool returned (its ``message_to_dict``)."""


class OnceTool(BaseTool):
    """A LangChain tool whose every call runs through `EffectLog.once`
    (docs/effects.md): a graph or agent replayed after a crash gets the
    recorded output of each call that finished, without the tool running
    again::

        tools = [OnceTool(send_email, store.journal("mailer").effects, session=thread_id)]

    A call given as a tool call (``{"type": "tool_call", "id": ..., "args":
    ...}``, as ``ToolNode`` and agents call tools) is keyed by ``session``
    and its id; one given plain arguments needs ``key``, a function of
    them. ``effects`` is an async store's (for ``ainvoke``) or a blocking
    store's (`sessionstore.sync`, for ``invoke``). What the tool returns is
    recorded: a message (the `ToolMessage` of a tool call) as LangChain
    serializes it, anything else as JSON (its text, when it is not).
    """

    wrapped: BaseTool
    effects: Any
    session: str | None = None
    key: Callable[[Any], str] | None = None
    check: Callable[[Effect], Any] | None = None
    idempotent: bool = False

    def __init__(
        self,
        wrapped: BaseTool,
        effects: EffectLog | SyncEffects,
        *,
        session: str | None = None,
        key: Callable[[Any], str] | None = None,
        check: Callable[[Effect], Any] | None = None,
        idempotent: bool = False,
    ) -> None:
        super().__init__(
            name=wrapped.name,
            description=wrapped.description,
            args_schema=wrapped.args_schema,
            wrapped=wrapped,
            effects=effects,
            session=session,
            key=key,
            check=check,
            idempotent=idempotent,
        )

    def _call(self, input: Any) -> dict[str, Any]:
        """`EffectLog.once`'s arguments for a call given ``input``."""
        call = isinstance(input, dict) and input.get("type") == "tool_call"
        args = input["args"] if call else input
        return {
            "tool": self.name,
            "args": args,
            "session": self.session,
            "call_id": input.get("id") if call else None,
            "key": None if self.key is None else self.key(args),
            "check": self.check,
            "idempotent": self.idempotent,
        }

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not isinstance(self.effects, EffectLog):
            raise ConfigurationError("OnceTool.ainvoke needs an async store's effects")

        async def call() -> Any:
            return _recorded(await self.wrapped.ainvoke(input, config, **kwargs))

        return _restored(await self.effects.once(call, **self._call(input)))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not isinstance(self.effects, SyncEffects):
            raise ConfigurationError("OnceTool.invoke needs a blocking store's effects")

        def call() -> Any:
            return _recorded(self.wrapped.invoke(input, config, **kwargs))

        return _restored(self.effects.once(call, **self._call(input)))

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("OnceTool runs through invoke and ainvoke")


def _recorded(output: Any) -> Any:
    if isinstance(output, BaseMessage):
        return {_RECORDED_MESSAGE: message_to_dict(output)}
    return output


def _restored(output: Any) -> Any:
    if isinstance(output, dict) and set(output) == {_RECORDED_MESSAGE}:
        return messages_from_dict([output[_RECORDED_MESSAGE]])[0]
    return output
