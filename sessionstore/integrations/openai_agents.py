"""An openai-agents ``Session`` kept in any sessionstore store.

``Runner.run(agent, "hi", session=StoreSession(store, "chat-42"))``: the
conversation ``chat-42`` lives in ``store`` (memory, JSONL, SQLite or
PostgreSQL), and nothing the framework does to it deletes anything.

Where things are:

* The conversation's name is the framework's ``session_id`` and the name of
  a head (`SessionStore.set_head`): the head names the conversation's
  current session. The first session has the conversation's name as its id
  (a session of that name that exists already is continued); later ones,
  made by `StoreSession.pop_item` and `StoreSession.clear_session`, have
  fresh ids and name the session they came from as their parent.
* Each item is one finalized `Message` entry. ``add_items`` appends the
  items of one call with one `SessionStore.append_many`: all or none.
* ``pop_item`` forks the current session just before the last item and
  moves the head there; ``clear_session`` starts a new empty session and
  moves the head there. Every earlier session stays, whole, and every
  position of the head stays in `SessionStore.head_history`.
* Any number of objects, in any threads, event loops and processes, may
  share a conversation: each change is a conditional write that the store
  checks as it writes (`sessionstore.integrations.conversation`), and no
  lock is held between calls.
* What a session converted is kept per store object and conversation
  (`sessionstore.integrations.kept`), not per session object: a
  `StoreSession` made for each request of a server reads only what was
  appended since the last one on that store.

An item becomes a message (`message_from_item`, reversed by
`item_from_message`; ``get_items`` gives back dicts equal to the ones
``add_items`` took):

* An item with a string ``role`` and a ``content`` (a user, assistant,
  system or developer message): the message has that role and content,
  and the item's other fields as its further fields, in their order, with
  ``"openai_agents": "message"``. `Message.text` and ``load_context``
  read such a message as any other.
* Any other item (``function_call``, ``function_call_output``,
  ``reasoning``, a type newer than this code...), and an item holding a
  ``streaming`` or ``openai_agents`` field of its own: the message's
  content is the whole item, its role the item's ``type`` (its ``role``
  when that is a string; ``"item"`` when it has neither), with
  ``"openai_agents": "item"``.

Messages written without the adapter (no ``openai_agents`` field) read as
``{"role": ..., "content": ..., **further fields}``, and compaction
entries are not items: a session begun with the store API can be
continued by an agent.

Values go through the wire format: JSON values only, and an integer beyond
64 bits comes back as a float.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from functools import partial
from operator import attrgetter
from types import TracebackType
from typing import Any, Self, TypeAlias, cast

try:
    from agents import FunctionTool, TResponseInputItem
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings
    from agents.tool_context import ToolContext
except ImportError as exc:
    raise ImportError(
        "sessionstore.integrations.openai_agents needs openai-agents 0.8 or newer: "
        "pip install 'sessionstore[openai-agents]'"
    ) from exc

from sessionstore import (
    ClosedError,
    CorruptSessionError,
    Effect,
    EffectLog,
    InvalidRecordError,
    Message,
    MessageEntry,
    SessionStore,
    open_store,
    validate_session_id,
)
from sessionstore.integrations.conversation import Conversation
from sessionstore.integrations.kept import KeptItems, Latest

__all__ = [
    "MARKER",
    "InvalidItemError",
    "StoreSession",
    "item_from_message",
    "message_from_item",
    "once_tool",
]

MARKER = "openai_agents"
"""The field that marks a message written by the adapter; its value names the layout."""


class InvalidItemError(InvalidRecordError, TypeError):
    """An item the store cannot keep: not a JSON object, or holding a value
    JSON cannot carry. A `TypeError` too, as openai-agents' own sessions
    raise for an item ``json.dumps`` refuses."""


_MESSAGE = "message"  # role and content are the item's own; its other fields follow
_ITEM = "item"  # the content is the whole item
_RESERVED = frozenset({"role", "content", "streaming", MARKER})


def message_from_item(item: Mapping[str, Any]) -> Message:
    """The message that stores an openai-agents input item (module docstring).

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
    """The openai-agents input item a stored message stands for (module docstring).

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

    Every method first reads the conversation's current session (the head
    named ``session_id``); `add_items` creates it on first use. Reads never
    write.

    Concurrency: any number of `StoreSession` objects, in any threads, event
    loops and processes (``Runner.run_sync`` in worker threads), may share
    one conversation. No lock is held between calls; each change states what
    it read and the store checks it as it writes
    (`sessionstore.integrations.conversation`): every `add_items` lands
    whole on the conversation's current session, every `pop_item` returns
    an item no other pop returned, and a `clear_session` racing an
    `add_items` loses nothing.

    Args:
        store: any store; the caller keeps it open (and closes it) unless the
            session was made by `open`.
        session_id: the conversation's name: the framework's
            ``session_id``, the head's name and the first session's id.
        session_settings: openai-agents' settings (or a dict of them); its
            ``limit`` is the default of `get_items`.

    Raises:
        InvalidSessionIdError: ``session_id`` breaks the session-id rule.
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self._conversation = Conversation(store, session_id, first_id=session_id)
        self.session_id = session_id
        self.session_settings = (
            SessionSettings() if session_settings is None else _settings(session_settings)
        )
        self._store = store
        self._kept = _kept_for(store, session_id)
        self._owns_store = False
        self._closed = False

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
        return _Opening(cls, target, session_id, session_settings, options)

    def __repr__(self) -> str:
        return f"StoreSession({self._store!r}, {self.session_id!r})"

    @property
    def store(self) -> SessionStore:
        """The store the conversation lives in."""
        return self._store

    async def current_session(self) -> str | None:
        """The id of the conversation's current session; None before first use.

        Raises:
            ClosedError: the session is closed.
        """
        self._check_open()
        return await self._conversation.current()

    # ------------------------------------------------ the Session protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The current session's items, oldest first.

        Args:
            limit: at most this many, the latest; None takes
                ``session_settings.limit``, and when that is None too, every
                item. Zero gives none; below zero, every item (as
                openai-agents' SQLite sessions read it).

        Raises:
            CorruptSessionError: a stored entry does not decode, or holds an
                item this version cannot read.
            ClosedError: the session is closed.
        """
        self._check_open()
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and limit < 0:
            limit = None
        current = await self._conversation.current()
        if current is None or limit == 0:
            return []
        return await self._kept.read(self._store, current, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items to the current session: all of them, together, or none.

        The first call creates the conversation's first session.

        Raises:
            InvalidItemError: an item is not a JSON object, or holds what
                the wire format cannot carry (a NaN...); nothing is stored.
            ClosedError: the session is closed.
        """
        self._check_open()
        entries = [MessageEntry.new(message_from_item(item)) for item in items]
        if entries:
            try:
                await self._conversation.add(entries)
            except InvalidRecordError as exc:
                raise InvalidItemError(str(exc)) from exc

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the last item off the conversation, losing nothing.

        The current session is forked just before its last item (with a
        single item, a new empty session takes its place) and the head
        moves to the fork; the session it left keeps the item.

        Returns:
            The item, as `add_items` took it; None when there is none.

        Raises:
            CorruptSessionError: as for `get_items`.
            ClosedError: the session is closed.
        """
        self._check_open()
        popped = await self._conversation.pop()
        return None if popped is None else _item(popped.session_id, popped.entry)

    async def clear_session(self) -> None:
        """Start the conversation over, losing nothing.

        A new empty session whose parent is the current one becomes current;
        the old one keeps every item. Clearing a conversation that holds no
        entry changes nothing.

        Raises:
            ClosedError: the session is closed.
        """
        self._check_open()
        await self._conversation.clear()

    # ------------------------------------------------ owning the store

    def close(self) -> Awaitable[None]:
        """End the session: every later call raises `ClosedError`; a store
        this session opened (`open`) is closed, one it was given is not.

        Callable from blocking code, as openai-agents' ``SQLiteSession.close``
        is (the store is closed before it returns), and to be awaited in
        async code, as ``AsyncSQLiteSession.close`` is (it closes the store
        there). Closing again, from any thread or loop, is fine: only the
        first close closes.
        """
        first, self._closed = not self._closed, True
        return _closed(self._store) if first and self._owns_store else _DONE

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{type(self).__name__} is closed (conversation {self.session_id!r})")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def once_tool(
    tool: FunctionTool,
    effects: EffectLog,
    *,
    session: str | None = None,
    key: Callable[[ToolContext[Any], str], str] | None = None,
    check: Callable[[Effect], Any] | None = None,
    idempotent: bool = False,
) -> FunctionTool:
    """``tool`` (a ``FunctionTool``, as ``@function_tool`` makes), each call
    run through `EffectLog.once` (docs/effects.md): a run replayed after a
    crash gets the recorded output of each call that finished, without the
    tool running again.

    Args:
        tool: the tool.
        effects: where its calls are recorded (``store.journal(name).effects``).
        session: the conversation the calls belong to; each call's key is
            the session and the model's tool-call id.
        key: what names a call instead, from its ``ToolContext`` and its
            JSON arguments.
        check, idempotent: for a call in doubt (see `EffectLog.once`); without
            either, `EffectInDoubtError` ends the run.

    What the tool returns is recorded as JSON (its text, for what is not JSON).
    """
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        return await effects.once(
            partial(invoke, context, arguments),
            tool=tool.name,
            args=arguments,  # the model's JSON text, as it gave it
            session=session,
            call_id=context.tool_call_id,
            key=None if key is None else key(context, arguments),
            check=check,
            idempotent=idempotent,
        )

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


class _Opening:
    """What `StoreSession.open` returns: await it, or use it with ``async with``."""

    def __init__(
        self,
        cls: type[StoreSession],
        target: str | os.PathLike[str],
        session_id: str,
        session_settings: SessionSettings | dict[str, Any] | None,
        options: dict[str, Any],
    ) -> None:
        self._cls = cls
        self._target = target
        self._session_id = session_id
        self._session_settings = session_settings
        self._options = options
        self._session: StoreSession | None = None

    async def _open(self) -> StoreSession:
        store = await open_store(self._target, **self._options)
        session = self._cls(store, self._session_id, session_settings=self._session_settings)
        session._owns_store = True
        return session

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


class _Done(Coroutine[Any, Any, None]):
    """A coroutine with nothing left to do: awaited, or run by ``asyncio.run``,
    it returns at once; left alone, it warns of nothing."""

    def send(self, value: Any) -> Any:
        raise StopIteration

    def throw(self, *args: Any) -> Any:
        raise args[0] if len(args) == 1 else args[1]

    def close(self) -> None:
        pass

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


_DONE = _Done()


def _closed(store: SessionStore) -> Coroutine[Any, Any, None]:
    """``store`` closed now from blocking code; from async code, what to await."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread: a blocking caller
        asyncio.run(store.close())
        return _DONE
    return store.close()


def _settings(settings: SessionSettings | dict[str, Any]) -> SessionSettings:
    return coerce_session_settings(settings)


CONVERSATIONS = 256
"""Conversations whose items are kept at most per store object, the latest
used (and at most `sessionstore.integrations.kept.KEPT_IN_ALL` bytes)."""

_kept_by_store: weakref.WeakKeyDictionary[SessionStore, Latest[_Kept]] = weakref.WeakKeyDictionary()
_kept_by_store_lock = threading.Lock()


def _kept_for(store: SessionStore, name: str) -> _Kept:
    """What the sessions on ``store`` keep of conversation ``name``, for as
    long as the store object lives: a session made for each request of a
    server reads on from what the last one read. A store object that cannot
    be weakly referenced, or hashed, keeps nothing: each session keeps its own."""
    try:
        with _kept_by_store_lock:
            kept = _kept_by_store.get(store)
            if kept is None:
                kept = Latest(_new_kept, most=CONVERSATIONS, weigh=attrgetter("weight"))
                _kept_by_store[store] = kept
    except TypeError:
        return _new_kept(name)
    return kept.get(name)


def _new_kept(name: str) -> _Kept:
    return KeptItems(_kept_item, _handed_out)


def _item(session_id: str, entry: MessageEntry) -> TResponseInputItem:
    try:
        item = item_from_message(entry.message)
    except InvalidRecordError as exc:
        raise CorruptSessionError(session_id, f"entry {entry.id!r}: {exc}") from exc
    return cast(TResponseInputItem, item)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _kept_item(session_id: str, entry: MessageEntry) -> dict[str, Any] | _Nested:
    """The item ``entry`` stands for, as `StoreSession` keeps it: a plain
    ``dict`` when its values are all strings, numbers, booleans or None (most
    messages: a plain copy of it is a deep one), else wrapped in `_Nested`.

    CPython's garbage collector does not track a plain dict of such values,
    nor a plain copy of it: kept items of 10,000-item conversations, and a
    `get_items` handing out copies of them, add nothing for the collector to
    walk. (A dict subclass, or a tuple holding a dict, is always tracked:
    copies of 10,000 pushed into the oldest generation made a full
    collection every other call, some 80% of the call's time.)
    """
    item = cast(dict[str, Any], _item(session_id, entry))
    if all(type(value) in _ATOMS for value in item.values()):
        return item
    return _Nested(item)


class _Nested:
    """A kept item holding lists or objects: handed out as a deep copy."""

    __slots__ = ("item",)

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item


_Kept: TypeAlias = KeptItems[dict[str, Any] | _Nested, Any]


def _handed_out(kept: dict[str, Any] | _Nested) -> Any:
    """A kept item as `get_items` hands it out: a deep copy of its own."""
    if type(kept) is dict:
        return kept.copy()
    return _copied(cast(_Nested, kept).item)


def _copied(value: Any) -> Any:
    """A deep copy of a JSON value (what `item_from_message` returns): each
    `get_items` hands out items of its own, as openai-agents' sessions do,
    so a caller changing one changes nothing kept."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _ATOMS else _copied(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _ATOMS else _copied(item) for item in value]
    return value
