"""The store of an adapter object: given by the caller, or opened on first use and closed.

``StoreSession("chat-1", "conv.db")`` and ``SessionStoreChatMessageHistory(
session_id="chat-1", connection="conv.db")`` (the peers' one-line
constructors) name a target, not a store: the object owns an `OwnedStore`,
opened on first use from whatever thread or event loop that is, and closed
by the object's ``close()`` or when it is collected unclosed. Each such
object opens a store of its own (docs/integrations.md gives the cost).

Opening and closing run in a thread of their own (`run_blocking`), so they
touch no event loop of the caller's: the stores belong to no loop
(docs/stores.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import threading
import typing
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

from sessionstore import ClosedError, ConfigurationError, SessionStore
from sessionstore.sync import SyncStore

__all__ = [
    "DONE",
    "IN_MEMORY",
    "Given",
    "OwnedStore",
    "blocking",
    "forms",
    "history_arguments",
    "on_store",
    "run_blocking",
    "session_arguments",
]

_S = TypeVar("_S")
_T = TypeVar("_T")


def run_blocking(call: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """What ``call()`` returns or raises, run in a thread and a loop of its own."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, asyncio.run(call())))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="sessionstore-open-close")
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


class _Done(Coroutine[Any, Any, None]):
    """A coroutine that returns at once, and left alone warns of nothing."""

    def send(self, value: Any) -> Any:
        raise StopIteration

    def throw(self, *args: Any) -> Any:
        raise args[0] if len(args) == 1 else args[1]

    def close(self) -> None:
        pass

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


DONE: Coroutine[Any, Any, None] = _Done()
"""What a close that finished before it returned gives back, to await or not."""


class OwnedStore(Generic[_S]):
    """The store of one adapter object: opened once, on first use, and closed once.

    Args:
        owner: the adapter object; collected unclosed, it closes the store
            (in a thread of its own: collection happens in any thread).
        target: what ``opener`` opens, named by errors.
        opener: opens the store (blocking).
        closer: closes it (blocking).
        opened: a store opened already, which this object now owns.
    """

    @classmethod
    def given(cls, owner: object, store: _S) -> OwnedStore[_S]:
        """A store the caller gave and keeps open: `get` returns it, `close` leaves it."""
        held = cls(owner, "", _no_opener, _leave_open, opened=store)
        held._finalizer.detach()
        return held

    @property
    def owned(self) -> bool:
        """Whether closing this closes the store (it was not given)."""
        return self._close is not _leave_open

    def __init__(
        self,
        owner: object,
        target: str,
        opener: Callable[[str], _S],
        closer: Callable[[_S], None],
        *,
        opened: _S | None = None,
    ) -> None:
        self.target = target
        self._open = opener
        self._close = closer
        # Held while opening, in a thread that may block; reentrant, for the
        # owner collected (by the cycle collector) in the opening thread.
        self._lock = threading.RLock()
        self._store = opened
        self._closed = False
        self._finalizer = weakref.finalize(owner, self._collected)
        # At exit, as any store left open: what was committed stays, and
        # the interpreter no longer runs the worker threads a close needs.
        self._finalizer.atexit = False

    def __repr__(self) -> str:
        return f"OwnedStore({self.target!r})"

    def get(self) -> _S:
        """The store, opened now if it is not yet (a blocking call).

        Raises:
            ClosedError: closed before anything opened it.
        """
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                if self._closed:
                    raise ClosedError(f"closed before it opened {self.target!r}")
                opened = self._open(self.target)
                if self._closed:  # the owner went while it opened
                    self._close(opened)
                    raise ClosedError(f"closed while it opened {self.target!r}")
                self._store = opened
            return self._store

    async def aget(self) -> _S:
        """`get`, the opening (once) in a worker thread: the loop is not held up."""
        store = self._store
        return store if store is not None else await asyncio.to_thread(self.get)

    def close(self) -> None:
        """Close the store if it was opened (blocking); only the first close closes."""
        store = self._take()
        if store is not None:
            self._close(store)

    def close_soon(self) -> Awaitable[None]:
        """`close`; from a running loop, started in a worker thread, and done
        when the awaitable returned is (not awaited, it ends on its own)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # blocking code
            self.close()
            return DONE
        store = self._take()
        if store is None or not self.owned:
            return DONE
        return loop.run_in_executor(None, self._close, store)

    def _take(self) -> _S | None:
        """The store to close, the first time; None after, or when none opened."""
        with self._lock:
            first, self._closed = not self._closed, True
        self._finalizer.detach()
        return self._store if first else None

    def _collected(self) -> None:
        store = self._take()
        if store is None:
            return
        thread = threading.Thread(target=self._close, args=(store,), name="sessionstore-close")
        thread.start()
        # The main thread is no store's worker, so it may wait; another
        # thread may be one whose end the close waits for.
        if threading.current_thread() is threading.main_thread():
            thread.join()


def _no_opener(target: str) -> Any:
    raise AssertionError("a given store is never opened")  # pragma: no cover


def _leave_open(store: Any) -> None:
    pass


async def on_store(
    store: SessionStore | SyncStore, call: Callable[[SessionStore], Awaitable[_T]]
) -> _T:
    """``call`` on the async store: awaited here, or on a blocking store's own
    loop from a worker thread (this loop is not held up meanwhile)."""
    if isinstance(store, SyncStore):
        return await asyncio.to_thread(store.run, call)
    return await call(store)


def blocking(store: SessionStore | SyncStore, method: str, what: str, instead: str) -> SyncStore:
    """``store``, for the blocking ``method`` of an adapter object (``what``).

    Raises:
        ConfigurationError: it is an async store (``instead``: what to do).
    """
    if isinstance(store, SyncStore):
        return store
    raise ConfigurationError(
        f"{method} is a blocking call, and this {what} is built on an async store: "
        f"{instead} on a sessionstore.sync store"
    )


# ---------------------------------------------------------------- the peers' arguments

IN_MEMORY = "memory://"
"""What the peer's in-memory database opens: an in-memory store of the object's own."""


@dataclasses.dataclass(frozen=True, slots=True)
class Given:
    """What an adapter's constructor was given, in either of its forms."""

    store: Any  # the store given, or None: the object opens ``target``
    name: str  # the conversation's (the peer's ``session_id``)
    target: str  # empty when a store was given
    settings: Any = None  # openai-agents' ``session_settings``


def forms(init: Callable[..., None]) -> dict[bool, inspect.Signature]:
    """An adapter's two forms, from the overloads of its ``__init__`` (the
    store's first, then the peer's), without ``self``: True is the store's."""
    found = [inspect.signature(each) for each in typing.get_overloads(init)]
    store, peer = (form.replace(parameters=[*form.parameters.values()][1:]) for form in found)
    return {True: store, False: peer}


def _shown(form: inspect.Signature) -> str:
    """A form as an error shows it: its parameters and defaults, without types."""
    plain = [each.replace(annotation=each.empty) for each in form.parameters.values()]
    return str(form.replace(parameters=plain, return_annotation=form.empty))


def _bound(
    cls: str, forms: dict[bool, inspect.Signature], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[bool, dict[str, Any]]:
    """Whether the arguments take the store form (a store first, or
    ``store=``), and the arguments by name, defaults filled in.

    Raises:
        TypeError: they do not fit that form, or the first is a path.
    """
    by_store = "store" in kwargs or (bool(args) and not isinstance(args[0], str))
    form = forms[by_store]
    try:
        bound = form.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{cls}{_shown(form)}: {exc}") from None
    bound.apply_defaults()
    given = bound.arguments
    if by_store and isinstance(given["store"], os.PathLike | bytes):
        raise TypeError(
            f"{cls}({given['store']!r}, ...): the first argument is a store, or the session "
            "id (a string) followed by where the store is"
        )
    return by_store, given


def _defaults_only(
    cls: str, name: str, given: dict[str, Any], defaults: dict[str, Any], peer: str
) -> None:
    """Refuse a peer's argument that has no meaning on a store, unless at its default."""
    for argument, default in defaults.items():
        if given[argument] != default:
            raise ConfigurationError(
                f"{cls}({name!r}, ...): {argument}={given[argument]!r} has no meaning here: "
                "the store keeps conversations in tables and a format of its own "
                f"(docs/integrations.md, Migrating from {peer}); leave it out"
            )


def session_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], forms: dict[bool, inspect.Signature]
) -> Given:
    """`StoreSession`'s arguments, in either form (``":memory:"`` is `IN_MEMORY`).

    Raises:
        TypeError: arguments that fit neither form.
        ConfigurationError: a table name other than ``SQLiteSession``'s default.
    """
    if (
        len(args) == 2
        and not isinstance(args[0], str | os.PathLike)
        and kwargs.keys() <= {"session_settings"}
    ):
        # A store and a name: a server's session per request, read without binding.
        return Given(args[0], args[1], "", kwargs.get("session_settings"))
    by_store, given = _bound("StoreSession", forms, args, kwargs)
    if by_store:
        return Given(given["store"], given["session_id"], "", given["session_settings"])
    name = given["session_id"]
    tables = {"sessions_table": "agent_sessions", "messages_table": "agent_messages"}
    _defaults_only("StoreSession", name, given, tables, "SQLiteSession")
    db_path = given["db_path"]
    if not isinstance(db_path, str | os.PathLike):
        raise TypeError(f"StoreSession({name!r}, {db_path!r}): db_path is a path or a store target")
    target = os.fspath(db_path)
    return Given(
        None, name, IN_MEMORY if target == ":memory:" else target, given["session_settings"]
    )


_IN_MEMORY_SQLITE = ("sqlite://", "sqlite:///:memory:", "sqlite+pysqlite://", "sqlite+aiosqlite://")


def history_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], forms: dict[bool, inspect.Signature]
) -> Given:
    """`SessionStoreChatMessageHistory`'s arguments, in either form: an
    in-memory SQLite URL is `IN_MEMORY`, an engine's URL is opened (the
    engine left alone), and ``async_mode`` changes nothing.

    Raises:
        TypeError: arguments that fit neither form, or no connection.
        ConfigurationError: a peer's argument other than its default, or an
            in-memory engine (whose database no other engine sees).
    """
    cls = "SessionStoreChatMessageHistory"
    if len(args) == 2 and not kwargs and not isinstance(args[0], str | os.PathLike):
        return Given(args[0], args[1], "")  # a store and a name, read without binding
    by_store, given = _bound(cls, forms, args, kwargs)
    if by_store:
        return Given(given["store"], given["name"], "")
    name = given["session_id"]
    peer_defaults = {
        "table_name": "message_store",
        "session_id_field_name": "session_id",
        "custom_message_converter": None,
        "engine_args": None,
    }
    _defaults_only(cls, name, given, peer_defaults, "SQLChatMessageHistory")
    connection, old = given["connection"], given["connection_string"]
    if connection is not None and old is not None:
        raise TypeError(f"{cls}({name!r}, ...): give connection or connection_string, not both")
    connection = old if connection is None else connection
    if connection is None:
        raise TypeError(
            f"{cls}({name!r}): needs connection=, a store target (conv.db, sqlite:///conv.db, "
            "postgresql://...) or a SQLAlchemy engine"
        )
    if isinstance(connection, str | os.PathLike):
        target = os.fspath(connection)
        return Given(None, name, IN_MEMORY if target in _IN_MEMORY_SQLITE else target)
    url: Any = getattr(connection, "url", None)
    if not hasattr(url, "render_as_string"):
        raise TypeError(
            f"{cls}({name!r}, connection={connection!r}): connection is a store target, a "
            "database URL or a SQLAlchemy engine"
        )
    if getattr(url, "database", None) in (None, "", ":memory:") and str(url).startswith("sqlite"):
        raise ConfigurationError(
            f"{cls}({name!r}, connection={connection!r}): an in-memory engine's database is "
            "seen by that engine only; build the histories on one store instead: "
            "SessionStoreChatMessageHistory(sessionstore.sync.open_store('memory://'), name)"
        )
    return Given(None, name, url.render_as_string(hide_password=False))
