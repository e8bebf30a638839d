"""An openai-agents ``Session`` kept in any sessionstore store: `StoreSession`.

``Runner.run(agent, "hi", session=StoreSession(store, "chat-42"))`` keeps the
conversation ``chat-42`` under a head of that name, and nothing the framework
does to it deletes anything; ``StoreSession("chat-42", "sessions.db")``, as
``SQLiteSession`` is called, opens a store of its own. docs/integrations.md
(openai-agents) tells where a conversation lives, how items map to messages
(`message_from_item`, `item_from_message`) and what each call guarantees.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from functools import partial
from types import TracebackType
from typing import Any, Self, TypeAlias, cast, overload

try:
    from agents import FunctionTool, RunContextWrapper, TResponseInputItem
    from agents.exceptions import AgentsException
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings
    from agents.tool_context import ToolContext
except ImportError as exc:
    raise ImportError(
        "sessionstore.integrations.openai_agents needs openai-agents 0.8 or newer: "
        "pip install 'sessionstore[openai-agents]'"
    ) from exc

import sessionstore.integrations.turns as turns
from sessionstore import (
    ClosedError,
    ConfigurationError,
    CorruptSessionError,
    Effect,
    EffectInDoubtError,
    EffectLog,
    InvalidRecordError,
    Message,
    MessageEntry,
    ScopedStore,
    SessionStore,
    open_store,
    validate_session_id,
)
from sessionstore.integrations.conversation import Conversation, check_scoped_name, first_id
from sessionstore.integrations.openai_agents_kept import Kept, kept_for
from sessionstore.integrations.owned import OwnedStore, forms, run_blocking, session_arguments
from sessionstore.integrations.turns import CallRanks

__all__ = [
    "MARKER",
    "InvalidItemError",
    "StoreSession",
    "Tenant",
    "ToolCallInDoubtError",
    "continue_turn",
    "item_from_message",
    "message_from_item",
    "once_tool",
]

MARKER = "openai_agents"
"""The field that marks a message written by the adapter; its value names the layout."""


Tenant: TypeAlias = Callable[[RunContextWrapper[Any]], str]
"""What names the owner a run serves, from its run context (``wrapper.context``):
a `StoreSession` given one keeps each run's conversation in that owner's
`ScopedStore`."""


class InvalidItemError(InvalidRecordError, TypeError):
    """An item the store cannot keep (not a JSON object, or a value JSON cannot
    carry); a `TypeError` too, as openai-agents' sessions raise."""


_MESSAGE = "message"  # role and content are the item's own; its other fields follow
_ITEM = "item"  # the content is the whole item
_RESERVED = frozenset({"role", "content", "streaming", MARKER})


def message_from_item(item: Mapping[str, Any]) -> Message:
    """The message that stores an openai-agents input item (docs/integrations.md).

    Raises:
        InvalidItemError: ``item`` is not a mapping.
    """
    if not isinstance(item, Mapping):
        raise InvalidItemError(
            f"an openai-agents item is a JSON object (a dict), not {type(item).__name__}"
        )
    fields = dict(item)
    role, kind = fields.get("role"), fields.get("type")
    keys_fit = all(isinstance(key, str) for key in fields) and not (
        fields.keys() & {"streaming", MARKER}
    )
    if isinstance(role, str) and "content" in fields and keys_fit:
        rest = {key: value for key, value in fields.items() if key not in _RESERVED}
        return Message.model_validate(
            {"role": role, "content": fields["content"], **rest, MARKER: _MESSAGE}
        )
    label = role if isinstance(role, str) else kind if isinstance(kind, str) else "item"
    return Message.model_validate({"role": label, "content": fields, MARKER: _ITEM})


def item_from_message(message: Message) -> dict[str, Any]:
    """The openai-agents input item a stored message stands for (docs/integrations.md).

    Raises:
        InvalidRecordError: the message names a layout this version does
            not know (written by a newer one), or is not what it claims.
    """
    extra = message.extra
    layout = extra.pop(MARKER, None)
    if layout == _ITEM and isinstance(message.content, dict):
        return dict(message.content)
    if layout is None or layout == _MESSAGE:
        return {"role": message.role, "content": message.content, **extra}
    raise InvalidRecordError(
        f"{MARKER}={layout!r} with content of type {type(message.content).__name__}: "
        "not a layout this version of sessionstore reads"
    )


class StoreSession:
    """An openai-agents ``Session`` whose conversation lives in a store.

    Made either way::

        StoreSession(store, "chat-42")       # on a store you opened (and close)
        StoreSession("chat-42", "conv.db")   # as openai-agents' SQLiteSession

    The second form takes ``SQLiteSession``'s arguments, so that changing
    the import is the whole migration: ``db_path`` is any `open_store`
    target (``":memory:"``, the default, an in-memory store of this
    object's own), opened on first use from whatever thread or event loop
    that is, and closed at `close` or when the session is collected.

    Any number of sessions, in any threads, loops and processes, may share
    one conversation (docs/integrations.md, Guarantees); given ``tenant``,
    one session object serves every user of a server (Serving many users).

    Args:
        store: any store; the caller keeps it open (and closes it) unless the
            session was made by `open`.
        session_id: the conversation's name: the framework's
            ``session_id``, the head's name and the first session's id (on
            a `ScopedStore`, the owner's: docs/integrations.md, Naming a
            conversation).
        db_path: instead of ``store``, the target of a store the session
            opens and owns.
        sessions_table, messages_table: ``SQLiteSession``'s table names,
            taken at their defaults only: a store has tables of its own.
        session_settings: openai-agents' settings (or a dict of them); its
            ``limit`` is the default of `get_items`.
        tenant: the owner of each call's run, from its run context (`Tenant`);
            a call without a run context (``wrapper``) is then refused.

    Raises:
        InvalidSessionIdError: ``session_id`` breaks the session-id rule, or
            leaves no room for a scoped store's prefix (given ``tenant``, or
            a `ScopedStore`).
        ConfigurationError: a table name other than ``SQLiteSession``'s default.
        TypeError: arguments that fit neither form, or a ``tenant`` not callable.
    """

    session_id: str
    session_settings: SessionSettings | None

    @overload
    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        tenant: Tenant | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | dict[str, Any] | None = None,
        *,
        tenant: Tenant | None = None,
    ) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        tenant = kwargs.pop("tenant", None)
        if tenant is not None and not callable(tenant):
            raise TypeError(
                f"StoreSession(..., tenant={tenant!r}): tenant is a function of the run "
                "context naming the owner, such as lambda run: run.context.user_id"
            )
        self._tenant: Tenant | None = tenant
        given = session_arguments(args, kwargs, _FORMS)
        self.session_id = validate_session_id(given.name)
        if tenant is not None:  # each call's store is a view: the name must leave it room
            check_scoped_name(self.session_id)
        elif given.store is not None:
            first_id(given.store, self.session_id)
        settings = given.settings
        self.session_settings = (
            SessionSettings() if settings is None else coerce_session_settings(settings)
        )
        self._lock = threading.Lock()  # held to set `_on`, never across a call
        self._closed = False
        self._owner: OwnedStore[SessionStore] = (
            OwnedStore(self, given.target, _open_async, _close_async)
            if given.store is None
            else OwnedStore.given(self, given.store)
        )
        self._on: _On | None = None

    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str],
        session_id: str,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **options: Any,
    ) -> _Opening:
        """A session on the store a target names (`open_store`), which it closes.

        Await it, or use it with ``async with`` to close the store at the end::

            async with StoreSession.open("sessions.db", "chat-42") as session:
                await Runner.run(agent, "Hello", session=session)

        Raises:
            ConfigurationError: as for `open_store`.
            InvalidSessionIdError: ``session_id`` breaks the session-id rule.
        """
        validate_session_id(session_id)

        async def opened() -> StoreSession:
            store = await open_store(target, **options)
            session = cls(store, session_id, session_settings=session_settings)
            owner = OwnedStore(session, os.fspath(target), _open_async, _close_async, opened=store)
            session._owner = owner
            return session

        return _Opening(opened)

    def __repr__(self) -> str:
        if self._owner.owned:
            return f"StoreSession({self.session_id!r}, {self._owner.target!r})"
        return f"StoreSession({self._owner.get()!r}, {self.session_id!r})"

    @property
    def store(self) -> SessionStore:
        """The store; one made with a target is opened now if no call has yet."""
        return self._owner.get()

    async def current_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> str | None:
        """The id of the conversation's current session; None before first use.

        Args:
            wrapper: the run context, which a session given ``tenant`` needs
                (as every method here): whose conversation it is.

        Raises:
            ClosedError: the session is closed.
            ConfigurationError: a session given ``tenant`` called without ``wrapper``.
        """
        on = await self._ready(wrapper)
        return await on.conversation.current()

    # ------------------------------------------------ the Session protocol

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The current session's items, oldest first: the latest ``limit``
        (None: ``session_settings.limit``, then all; below zero, all).

        Raises:
            CorruptSessionError: a stored item this version cannot read.
            ClosedError: the session is closed.
        """
        on = await self._ready(wrapper)
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and limit < 0:
            limit = None
        if limit == 0:
            return []
        read = await on.conversation.read(
            lambda session, head: on.kept.read(on.store, session, limit, expect_head=head)
        )
        return [] if read is None else read

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append items to the current session, all or none; the input of the
        open turn a crash cut, sent again, is not stored twice (`continue_turn`).

        Raises:
            InvalidItemError: an item is not a JSON object, or holds what
                the wire format cannot carry (a NaN...); nothing is stored.
            ClosedError: the session is closed.
        """
        self._check_open()
        entries = [MessageEntry.new(message_from_item(item)) for item in items]
        if entries:
            on = await self._ready(wrapper)
            try:
                await on.conversation.add_input(entries)
            except InvalidRecordError as exc:
                raise InvalidItemError(str(exc)) from exc

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Take the last item off: the head moves to a fork just before it.

        Returns:
            The item, as `add_items` took it; None when there is none.

        Raises:
            CorruptSessionError: as for `get_items`.
            ClosedError: the session is closed.
        """
        on = await self._ready(wrapper)
        popped = await on.conversation.pop()
        return None if popped is None else _item(popped.session_id, popped.entry)

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Start over in a new empty session whose parent is the current one.

        Raises:
            ClosedError: the session is closed.
        """
        on = await self._ready(wrapper)
        await on.conversation.clear()

    # ------------------------------------------------ owning the store

    def close(self) -> Awaitable[None]:
        """End the session: later calls raise `ClosedError`; a store it opened
        is closed, one it was given is not. Called from blocking code (as
        ``SQLiteSession.close``) or awaited (as ``AsyncSQLiteSession.close``);
        closing again is fine."""
        self._closed = True
        return self._owner.close_soon()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{type(self).__name__} is closed (conversation {self.session_id!r})")

    async def _ready(self, wrapper: RunContextWrapper[Any] | None) -> _On:
        """The store and what the session keeps on it, the store opened on
        first use; with ``tenant``, the run's owner's view of it."""
        self._check_open()
        if self._tenant is not None:
            if wrapper is None:
                raise ConfigurationError(
                    f"StoreSession {self.session_id!r} keeps each user's conversation apart "
                    "(tenant=...): call it with wrapper=, the run context (a "
                    "RunContextWrapper), as the Runner does"
                )
            owner = self._tenant(wrapper)
            store = await self._owner.aget()
            # Made per call, as a session per request is: the store keeps the
            # items (`kept_for`, under the owner's own key), nothing is lost.
            return _On.of(ScopedStore(store, owner), self.session_id)
        on = self._on
        if on is None:
            store = await self._owner.aget()
            with self._lock:
                on = self._on = self._on or _On.of(store, self.session_id)
        return on

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


_FORMS = forms(StoreSession.__init__)


@dataclasses.dataclass(frozen=True, slots=True)
class _On:
    """A session's store, its conversation there, and what it keeps of it."""

    store: SessionStore
    conversation: Conversation
    kept: Kept

    @classmethod
    def of(cls, store: SessionStore, name: str) -> _On:
        # The session kept is where an earlier session object last read the
        # head: a session per request starts there, its reads checking it.
        kept = kept_for(store, name, _item)
        first = first_id(store, name)
        conversation = Conversation(store, name, first_id=first, seen=kept.session_id)
        return cls(store, conversation, kept)


def _open_async(target: str) -> SessionStore:
    return run_blocking(partial(open_store, target))  # what open_store returns is a coroutine


def _close_async(store: SessionStore) -> None:
    run_blocking(store.close)


class ToolCallInDoubtError(EffectInDoubtError, AgentsException):
    """A `once_tool` call in doubt: an `AgentsException` the Runner lets
    through unwrapped, so the run ends with the commands that settle it."""


def once_tool(
    tool: FunctionTool,
    effects: EffectLog,
    *,
    session: StoreSession | str | None = None,
    key: Callable[[ToolContext[Any], str], str] | None = None,
    check: Callable[[Effect], Any] | None = None,
    idempotent: bool = False,
) -> FunctionTool:
    """``tool`` (a ``FunctionTool``), each call run through `EffectLog.once`
    (docs/effects.md): a run replayed after a crash gets the recorded output
    of each call that finished, without the tool running again. What the
    tool returns is recorded as JSON (its text, for what is not JSON).

    Args:
        tool: the tool.
        effects: where its calls are recorded (``store.journal(name).effects``).
        session: the `StoreSession` of the run: each call is keyed by what a
            model asked again does not change (`turns.turn_key`); a
            conversation's name keys it by the model's tool-call id instead.
        key: what names a call instead, from its ``ToolContext`` and its
            JSON arguments.
        check, idempotent: for a call in doubt (`EffectLog.once`); without
            either, `ToolCallInDoubtError` ends the run, saying how to settle it.
    """
    invoke = tool.on_invoke_tool
    ranks = CallRanks()

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        # Keyed by the turn, a call names its arguments by their JSON value
        # (a model asked again may space them otherwise); by its id, by the
        # model's text, as it gave it.
        by_turn = key is None and isinstance(session, StoreSession)
        args = turns.arguments(arguments) if by_turn else arguments
        if key is not None:
            call_key: str | None = key(context, arguments)
        elif isinstance(session, StoreSession):
            call_key = await _turn_key(session, context, tool.name, args, ranks)
        else:
            call_key = None
        name = session.session_id if isinstance(session, StoreSession) else session
        return await effects.once(
            partial(invoke, context, arguments),
            tool=tool.name,
            args=args,
            session=name,
            call_id=context.tool_call_id,
            key=call_key,
            check=check,
            idempotent=idempotent,
        )

    return dataclasses.replace(tool, on_invoke_tool=_in_doubt_as_itself(on_invoke_tool))


def _in_doubt_as_itself(
    invoke: Callable[[ToolContext[Any], str], Awaitable[Any]],
) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    """``invoke``, an `EffectInDoubtError` it raises made a `ToolCallInDoubtError`."""

    async def invoked(context: ToolContext[Any], arguments: str) -> Any:
        try:
            return await invoke(context, arguments)
        except EffectInDoubtError as exc:
            raise ToolCallInDoubtError(
                exc.intent, journal=exc.journal, options=exc.options
            ) from None

    return invoked


async def _turn_key(
    session: StoreSession, context: ToolContext[Any], tool: str, args: Any, ranks: CallRanks
) -> str:
    """The key of a call of ``tool`` in the turn ``session``'s conversation
    stands in (the run's owner's, for a session given ``tenant``)."""
    on = await session._ready(context)
    current, call_id = await on.conversation.current(), context.tool_call_id
    if current is None:  # nothing stored (a run without its session): the call's own id
        return f"{session.session_id}:{call_id}"
    call = (call_id, tool, args)
    return await turns.stored_call_key(on.store, current, session.session_id, call, ranks)


def continue_turn(
    history: list[TResponseInputItem], new_items: list[TResponseInputItem]
) -> list[TResponseInputItem]:
    """A ``session_input_callback`` (``RunConfig``) for runs that may resume
    a crashed turn: when ``new_items`` are the input of the open turn
    ``history`` ends in, the model is given ``history`` alone (and does not
    see the input twice); else ``history`` then ``new_items``::

        config = RunConfig(session_input_callback=continue_turn)
        await Runner.run(agent, "Send the report", session=session, run_config=config)
    """
    last_user = next(
        (i for i in range(len(history) - 1, -1, -1) if _role(history[i]) == "user"), None
    )
    if last_user is not None:
        start = max(0, last_user + 1 - len(new_items))
        tail = [MessageEntry.new(message_from_item(item)) for item in history[start:]]
        entries = [MessageEntry.new(message_from_item(item)) for item in new_items]
        if turns.resumes(tail, entries):
            return list(history)
    return [*history, *new_items]


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)


class _Opening:
    """What `StoreSession.open` returns: await it, or use it with ``async with``."""

    def __init__(self, open: Callable[[], Awaitable[StoreSession]]) -> None:
        self._open = open
        self._session: StoreSession | None = None

    def __await__(self) -> Generator[Any, None, StoreSession]:
        return self._open().__await__()

    async def __aenter__(self) -> StoreSession:
        self._session = await self._open()
        return self._session

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()


def _item(session_id: str, entry: MessageEntry) -> TResponseInputItem:
    try:
        item = item_from_message(entry.message)
    except InvalidRecordError as exc:
        raise CorruptSessionError(session_id, f"entry {entry.id!r}: {exc}") from exc
    return cast(TResponseInputItem, item)
