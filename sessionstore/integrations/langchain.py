"""LangChain chat history kept in a session store: `SessionStoreChatMessageHistory`.

A LangChain ``BaseChatMessageHistory`` (what ``RunnableWithMessageHistory``
reads and writes) over a store, or, called as langchain-community's
``SQLChatMessageHistory`` is, over a store of its own. The conversation is a
named head; ``clear`` deletes nothing. docs/integrations.md (LangChain) tells
how messages are stored (`to_message`, `from_context`) and what each call
guarantees.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from operator import attrgetter
from typing import Any, TypeVar, overload

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

from pydantic import PrivateAttr

import sessionstore.integrations.turns as turns
from sessionstore import (
    ClosedError,
    ConfigurationError,
    Effect,
    EffectLog,
    Message,
    MessageEntry,
    SessionStore,
    validate_session_id,
)
from sessionstore.integrations.conversation import Conversation, first_id
from sessionstore.integrations.kept import KeptContext, Latest
from sessionstore.integrations.owned import OwnedStore, blocking, forms, history_arguments, on_store
from sessionstore.integrations.turns import CallRanks
from sessionstore.sync import SyncEffects, SyncStore
from sessionstore.sync import open_store as open_sync_store

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

_Content = str | list[str | dict[str, Any]]
_T = TypeVar("_T")


class SessionStoreChatMessageHistory(BaseChatMessageHistory):
    """The messages of one conversation, kept in a session store.

    Made either way::

        SessionStoreChatMessageHistory(store, "chat-42")
        SessionStoreChatMessageHistory(session_id="chat-42", connection="conv.db")

    The second form takes ``SQLChatMessageHistory``'s arguments and opens a
    blocking store of its own, closed at `close` (docs/integrations.md,
    Migrating from SQLChatMessageHistory); many conversations share one
    store in the first form (`ChatHistories`).

    Args:
        store: a `sessionstore.sync.SyncStore` (every method works) or an
            async `SessionStore` (only the async methods work).
        name: the conversation: the name of the head that names its
            current session, and the id of its first session (the
            session-id rule applies). For ``RunnableWithMessageHistory``,
            its ``session_id``.
        session_id, connection: instead of ``store`` and ``name``, the
            conversation and where the store the history opens and owns is.
        table_name, session_id_field_name, custom_message_converter,
            engine_args: ``SQLChatMessageHistory``'s, taken at their defaults
            only: a store has tables and a format of its own.

    Raises:
        InvalidSessionIdError: ``name`` breaks the session-id rule.
        ConfigurationError: one of the peer's arguments has no meaning here
            (see `sessionstore.integrations.owned.history_arguments`).
        TypeError: arguments that fit neither form.
    """

    @overload
    def __init__(self, store: SessionStore | SyncStore, name: str) -> None: ...

    @overload
    def __init__(
        self,
        session_id: str,
        connection_string: str | None = None,
        table_name: str = "message_store",
        session_id_field_name: str = "session_id",
        custom_message_converter: Any = None,
        connection: Any = None,
        engine_args: dict[str, Any] | None = None,
        async_mode: bool | None = None,
    ) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        given = history_arguments(args, kwargs, _FORMS)
        self.name = validate_session_id(given.name)
        self._owner: OwnedStore[SessionStore | SyncStore] = (
            OwnedStore(self, given.target, open_sync_store, _close_sync)
            if given.store is None
            else OwnedStore.given(self, given.store)
        )
        self._closed = False
        # What this history's reads converted: the next read converts only
        # the messages added since (`sessionstore.integrations.kept`).
        self._kept = KeptContext(_from_context)
        # The conversation on the async store, made on first use: it
        # remembers the current session it last saw, where `add` appends.
        self._on: Conversation | None = None

    def __repr__(self) -> str:
        if self._owner.owned:
            return f"SessionStoreChatMessageHistory({self.name!r}, {self._owner.target!r})"
        return f"SessionStoreChatMessageHistory({self._owner.get()!r}, {self.name!r})"

    @property
    def store(self) -> SessionStore | SyncStore:
        """The store; one made with a connection is opened now if no call has yet."""
        return self._owner.get()

    def close(self) -> None:
        """End the history: later calls raise `ClosedError`; a store it opened
        is closed before this returns, one it was given stays open."""
        self._closed = True
        self._owner.close()

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
        """Store messages at the end of the conversation, all or none; the
        input of the open turn a crash cut, sent again, is not stored twice."""
        entries = [MessageEntry.new(to_message(message)) for message in messages]
        if entries:
            self._sync_store("add_messages").run(partial(self._add, entries=entries))

    def clear(self) -> None:
        """Start over in a new empty session whose parent is the current one."""
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
            on = self._on = Conversation(store, self.name, first_id=first_id(store, self.name))
        return on

    async def _read(self, store: SessionStore) -> list[BaseMessage]:
        read = await self._conversation(store).read(
            lambda session, head: self._kept.read(store, session, expect_head=head)
        )
        return [] if read is None else read

    async def _add(self, store: SessionStore, *, entries: list[MessageEntry]) -> None:
        await self._conversation(store).add_input(entries)

    async def _clear(self, store: SessionStore) -> None:
        await self._conversation(store).clear()

    async def _await(self, call: Callable[[SessionStore], Awaitable[_T]]) -> _T:
        self._check_open()
        return await on_store(await self._owner.aget(), call)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{type(self).__name__} is closed (conversation {self.name!r})")

    def _sync_store(self, method: str) -> SyncStore:
        self._check_open()
        return blocking(
            self.store,
            method,
            "history",
            "await its async methods (aget_messages, aadd_messages, aclear; a chain's "
            "ainvoke), or build it",
        )


_FORMS = forms(SessionStoreChatMessageHistory.__init__)


def _close_sync(store: SessionStore | SyncStore) -> None:
    assert isinstance(store, SyncStore)  # what open_sync_store opened
    store.close()


class ChatHistories:
    """The histories of a store's conversations, each keeping what it converted.

    Give it to ``RunnableWithMessageHistory`` as ``get_session_history``,
    which asks for a history at every call::

        histories = ChatHistories(open_store("sessions.db"))
        chain = RunnableWithMessageHistory(runnable, histories)

    It hands out the same history for a conversation at every call (for
    the last `CONVERSATIONS` used), so a turn converts only the messages
    added since the last one.

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
    # A LangChain message needs nothing of those before it.
    return from_context(messages)


# ---------------------------------------------------------------- messages


def to_message(message: BaseMessage) -> Message:
    """A LangChain message as the store keeps it; `from_context` gives it back
    equal (a value JSON cannot carry is refused at the append)."""
    serialized = message_to_dict(message)
    data = {key: value for key, value in serialized["data"].items() if key != "content"}
    content = serialized["data"]["content"]
    fields: dict[str, Any] = {}
    if isinstance(message, AIMessage) and message.tool_calls:
        fields["tool_calls"] = [
            turns.openai_call(
                call["id"], call["name"], json.dumps(call["args"], ensure_ascii=False)
            )
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

    A message `to_message` made comes back equal; any other is mapped by
    role (docs/integrations.md).
    """
    return [_from_message(message) for message in messages]


_ROLES: tuple[tuple[type[BaseMessage], str], ...] = (
    (HumanMessage, "user"),
    (AIMessage, "assistant"),
    (SystemMessage, "system"),
    (ToolMessage, "tool"),
    (FunctionMessage, "function"),
)


def _role(message: BaseMessage) -> str:
    # Chunks subclass their message classes, so they map alike.
    role = next((role for kind, role in _ROLES if isinstance(message, kind)), None)
    if role is not None:
        return role
    return message.role if isinstance(message, ChatMessage) else message.type


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
        calls, invalid = _tool_calls(message)
        return AIMessage(content=content, tool_calls=calls, invalid_tool_calls=invalid, **named)
    if message.role == "tool":
        call_id = message.extra.get("tool_call_id")
        return ToolMessage(content=content, tool_call_id=str(call_id or ""), **named)
    return ChatMessage(role=message.role, content=content, **named)


def _content(message: Message) -> _Content:
    """The content as LangChain takes it (a string, or strings and blocks), else its text."""
    content = message.content
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, str | dict) for part in content):
        return content
    return message.text()


def _tool_calls(message: Message) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """A message's OpenAI-shaped tool calls as LangChain's valid and invalid ones."""
    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for stored_id, name, arguments in turns.openai_calls(message):
        call_id = stored_id if isinstance(stored_id, str) else None
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

        history = SessionStoreChatMessageHistory(store, "chat-42")
        tools = [OnceTool(send_email, store.journal("mailer").effects, history=history)]

    A tool call (``{"type": "tool_call", ...}``, as ``ToolNode`` and agents
    call tools) is keyed by what a model asked again does not change
    (`sessionstore.integrations.turns.turn_key`) in the conversation of
    ``history`` (without ``history`` and ``session``, the one
    ``RunnableWithMessageHistory`` runs the call in); with ``session`` (a
    graph's thread, whose checkpoints keep the model's ids), by ``session``
    and the call's id. Plain arguments need ``key``, a function of them.
    ``effects`` is an async store's (for ``ainvoke``) or a blocking store's
    (for ``invoke``). A message returned is recorded as LangChain
    serializes it, anything else as JSON (its text, when it is not).
    """

    wrapped: BaseTool
    effects: Any
    session: str | None = None
    history: Any = None
    key: Callable[[Any], str] | None = None
    check: Callable[[Effect], Any] | None = None
    idempotent: bool = False
    _ranks: CallRanks = PrivateAttr(default_factory=CallRanks)

    def __init__(
        self,
        wrapped: BaseTool,
        effects: EffectLog | SyncEffects,
        *,
        session: str | None = None,
        history: SessionStoreChatMessageHistory | None = None,
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
            history=history,
            key=key,
            check=check,
            idempotent=idempotent,
        )

    def _history(self, input: Any, config: RunnableConfig | None) -> Any:
        """The history whose turn keys the call; None: keyed otherwise."""
        if self.key is not None or not _is_tool_call(input):
            return None
        if self.history is not None or self.session is not None:
            return self.history
        running = ((config or {}).get("configurable") or {}).get("message_history")
        return running if isinstance(running, SessionStoreChatMessageHistory) else None

    def _turn_key(
        self, history: SessionStoreChatMessageHistory, input: Any
    ) -> Callable[[SessionStore], Awaitable[str]]:
        call = (str(input.get("id")), self.name, input["args"])
        return partial(_turn_key, history, call, self._ranks)

    def _call(
        self, input: Any, key: str | None, history: SessionStoreChatMessageHistory | None
    ) -> dict[str, Any]:
        """`EffectLog.once`'s arguments for a call given ``input``."""
        call = _is_tool_call(input)
        args = input["args"] if call else input
        if key is None and self.key is not None:
            key = self.key(args)
        return {
            "tool": self.name,
            "args": args,
            "session": self.session if history is None else history.name,
            "call_id": input.get("id") if call else None,
            "key": key,
            "check": self.check,
            "idempotent": self.idempotent,
        }

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not isinstance(self.effects, EffectLog):
            raise ConfigurationError("OnceTool.ainvoke needs an async store's effects")

        async def call() -> Any:
            return _recorded(await self.wrapped.ainvoke(input, config, **kwargs))

        history = self._history(input, config)
        key = None if history is None else await history._await(self._turn_key(history, input))
        once = self._call(input, key, history)
        return _answered(input, self.name, await self.effects.once(call, **once))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if not isinstance(self.effects, SyncEffects):
            raise ConfigurationError("OnceTool.invoke needs a blocking store's effects")

        def call() -> Any:
            return _recorded(self.wrapped.invoke(input, config, **kwargs))

        history, key = self._history(input, config), None
        if history is not None:
            key = history._sync_store("OnceTool.invoke").run(self._turn_key(history, input))
        once = self._call(input, key, history)
        return _answered(input, self.name, self.effects.once(call, **once))

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("OnceTool runs through invoke and ainvoke")


async def _turn_key(
    history: SessionStoreChatMessageHistory,
    call: tuple[str, str, Any],
    ranks: CallRanks,
    store: SessionStore,
) -> str:
    """The key of ``call`` in the turn ``history``'s conversation stands in."""
    conversation = history._conversation(store)
    current = await conversation.current()
    if current is None:  # nothing stored yet: the first session's first turn
        call_id, tool, args = call
        rank = ranks.rank((conversation.first_id, tool, turns.digest(args)), call_id, [])
        return turns.turn_key(history.name, conversation.first_id, tool, args, rank)
    return await turns.stored_call_key(store, current, history.name, call, ranks)


def _is_tool_call(input: Any) -> bool:
    return isinstance(input, dict) and input.get("type") == "tool_call"


def _recorded(output: Any) -> Any:
    if isinstance(output, BaseMessage):
        return {_RECORDED_MESSAGE: message_to_dict(output)}
    return output


def _answered(input: Any, name: str, output: Any) -> Any:
    """What a call given ``input`` returns from its recorded ``output``: for a
    tool call, a `ToolMessage` answering this call's id (a rerun's is new)."""
    restored = _restored(output)
    if not _is_tool_call(input):
        return restored
    call_id = input.get("id")
    if isinstance(restored, ToolMessage):
        return restored.model_copy(update={"tool_call_id": call_id})
    if isinstance(restored, BaseMessage):
        return restored
    content = restored if isinstance(restored, str) else json.dumps(restored, ensure_ascii=False)
    return ToolMessage(content=content, name=name, tool_call_id=call_id)


def _restored(output: Any) -> Any:
    if isinstance(output, dict) and set(output) == {_RECORDED_MESSAGE}:
        return messages_from_dict([output[_RECORDED_MESSAGE]])[0]
    return output
