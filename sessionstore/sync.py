"""A blocking facade over any store, for code without an event loop.

A Flask or Django view, a script, a Celery task: ``sessionstore.sync``
gives them every store and journal method as a plain call that returns when
the work is done::

    from sessionstore import Message, MessageEntry, SessionMeta
    from sessionstore.sync import open_store

    with open_store("sessions.db") as store:
        session_id = store.create(SessionMeta.new())
        store.append(session_id, MessageEntry.new(Message.user("Hello")))
        print(store.load_context(session_id))

Each `SyncStore` runs one event loop in a thread of its own and hands every
call to the async store on it, errors unchanged. Any number of threads may
call it at once (their appends share transactions, as tasks do), and so may
code inside an event loop, which it blocks for the call. Streams are
generators: close one left unfinished to let go of its file or cursor.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import inspect
import os
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Sequence,
)
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from sessionstore.backends import open_store as open_async_store
from sessionstore.backends.checks import JournalDurability
from sessionstore.effect_journals import JournalEffect
from sessionstore.effect_journals import effects_in_doubt as async_effects_in_doubt
from sessionstore.effect_journals import forget_effects as async_forget_effects
from sessionstore.effect_options import DEAD_LETTER_AFTER, Backoff
from sessionstore.effects import EffectLog
from sessionstore.errors import ClosedError, StorageError
from sessionstore.models import Effect
from sessionstore.scoped import ScopedStore
from sessionstore.store import Capability, SessionJournal, SessionStore
from sessionstore.timestamps import Timestamp

__all__ = [
    "SyncJournal",
    "SyncScopedStore",
    "SyncStore",
    "effects_in_doubt",
    "forget_effects",
    "open_store",
]

_T = TypeVar("_T")
_O = TypeVar("_O")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Loop:
    """An event loop in a daemon thread of its own, taking calls from any thread.

    Every call in flight is known, so that `stop` can end each one (its
    caller gets `StorageError`) rather than leave it waiting for a dead loop.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="sessionstore-sync", daemon=True
        )
        self._thread.start()
        self._guard = threading.Lock()  # `closed` and `_calls` change together
        self._calls: set[concurrent.futures.Future[Any]] = set()
        self.closed = False

    def run(self, call: Coroutine[Any, Any, _T]) -> _T:
        """Run ``call`` on the loop; block until it is done, and return or raise what it did.

        Raises:
            StorageError: the loop is stopped, or stops while the call runs.
        """
        if threading.current_thread() is self._thread:
            call.close()
            raise RuntimeError("a sync store cannot be called from its own loop's thread")
        with self._guard:
            if self.closed:
                call.close()
                raise ClosedError("the sync store is closed")
            future = asyncio.run_coroutine_threadsafe(call, self._loop)
            self._calls.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self.closed:
                raise ClosedError("the sync store was closed during the call") from None
            raise
        finally:
            with self._guard:
                self._calls.discard(future)

    def stream(self, items: AsyncIterator[_T]) -> Generator[_T, None, None]:
        """An async iterator, drawn one item at a time on the loop."""
        try:
            while True:
                try:
                    item = self.run(_next(items))
                except StopAsyncIteration:
                    return
                yield item
        finally:
            close = getattr(items, "aclose", None)
            if close is not None and not self.closed:
                with contextlib.suppress(StorageError):  # closed meanwhile: the loop ends it
                    self.run(close())

    def stop(self, last: Coroutine[Any, Any, None] | None = None) -> None:
        """Refuse new calls, end those in flight, run ``last`` (the store's
        close), then stop the loop; stopping twice is fine."""
        with self._guard:
            if self.closed:
                if last is not None:
                    last.close()
                return
            self.closed = True
            calls = list(self._calls)
        for future in calls:  # their callers get StorageError now
            future.cancel()
        try:
            asyncio.run_coroutine_threadsafe(_finish(last), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


async def _finish(last: Coroutine[Any, Any, None] | None) -> None:
    """Let the cancelled calls unwind (closing their files and cursors), then
    run ``last`` and finish the async generators left open."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    if tasks:
        await asyncio.wait(tasks)
    try:
        if last is not None:
            await last
    finally:
        await asyncio.get_running_loop().shutdown_asyncgens()


async def _called(call: Callable[[SessionStore], Awaitable[_T]], store: SessionStore) -> _T:
    return await call(store)


async def _next(items: AsyncIterator[_T]) -> _T:
    return await anext(items)


async def _lines(lines: Iterable[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


class _Facade(Generic[_O]):
    """An async object (a store, a journal, its effects), called from blocking code."""

    def __init__(self, target: _O, loop: _Loop) -> None:
        self._target = target
        self._loop = loop


class _Forwarded(Generic[_P, _R]):
    """The method of that name of a facade's object, its result handed to
    ``run`` on the facade's loop (`_blocking`, `_streamed`); its docstring is
    the async method's, under a line saying how it differs (``form``)."""

    def __init__(self, method: Callable[..., Any], run: Callable[[_Loop, Any], _R], form: str):
        self._name = method.__name__
        self._run = run
        self.__doc__ = f"{form} of `{method.__qualname__}`.\n\n{inspect.getdoc(method) or ''}"

    @overload
    def __get__(self, facade: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, facade: _Facade[Any], owner: type[Any]) -> Callable[_P, _R]: ...

    def __get__(self, facade: _Facade[Any] | None, owner: type[Any]) -> Self | Callable[_P, _R]:
        if facade is None:
            return self
        method: Callable[_P, Any] = getattr(facade._target, self._name)
        run, loop = self._run, facade._loop

        def forwarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            return run(loop, method(*args, **kwargs))

        forwarded.__doc__ = self.__doc__  # for help() on a store's method
        return forwarded


def _blocking(
    method: Callable[Concatenate[Any, _P], Coroutine[Any, Any, _T]],
) -> _Forwarded[_P, _T]:
    """An async method as a call that blocks until it is done: same arguments,
    same result, same errors."""
    return _Forwarded(method, _Loop.run, "Blocking form")


def _streamed(
    method: Callable[Concatenate[Any, _P], AsyncIterator[_T]],
) -> _Forwarded[_P, Generator[_T, None, None]]:
    """An async stream as a generator."""
    return _Forwarded(method, _Loop.stream, "Generator form")


class SyncStore(_Facade[SessionStore]):
    """A store whose methods block; see `sessionstore.store.SessionStore` for
    what each one does (same arguments, same results, same errors).

    Open one with `open_store`, or wrap an async store with `SyncStore.wrap`.
    """

    def __init__(self, store: SessionStore, loop: _Loop) -> None:
        """Use `open_store` or `wrap`."""
        super().__init__(store, loop)

    @classmethod
    def wrap(cls, opening: Coroutine[Any, Any, SessionStore]) -> SyncStore:
        """A sync store over the async store ``opening`` makes (a coroutine,
        such as ``SqlStore.open(...)``), opened on the sync store's own loop."""
        loop = _Loop()
        try:
            return cls(loop.run(opening), loop)
        except BaseException:
            loop.stop()
            raise

    def __repr__(self) -> str:
        return f"SyncStore({self._target!r})"

    @property
    def store(self) -> SessionStore:
        """The async store underneath (to be awaited only on this object's loop)."""
        return self._target

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The async store's `SessionStore.capabilities`."""
        return self._target.capabilities

    def run(self, call: Callable[[SessionStore], Awaitable[_T]]) -> _T:
        """Await ``call(store)`` on this object's loop, ``store`` being the async
        store underneath, and return what it returns: async code written
        against `SessionStore` (a `sessionstore.integrations.conversation.
        Conversation`, say), run from blocking code in one hop.

        Raises:
            whatever ``call`` raises; StorageError: the sync store is closed.
        """
        return self._loop.run(_called(call, self._target))

    create = _blocking(SessionStore.create)
    append = _blocking(SessionStore.append)
    append_many = _blocking(SessionStore.append_many)
    load = _blocking(SessionStore.load)
    load_slice = _blocking(SessionStore.load_slice)
    iter_entries = _streamed(SessionStore.iter_entries)
    load_context = _blocking(SessionStore.load_context)
    load_context_with_ids = _blocking(SessionStore.load_context_with_ids)
    compact = _blocking(SessionStore.compact)
    list = _blocking(SessionStore.list)
    summaries = _blocking(SessionStore.summaries)
    search = _blocking(SessionStore.search)
    set_title = _blocking(SessionStore.set_title)
    titles = _blocking(SessionStore.titles)
    import_titles = _blocking(SessionStore.import_titles)
    integrity = _blocking(SessionStore.integrity)
    fork = _blocking(SessionStore.fork)
    set_head = _blocking(SessionStore.set_head)
    head = _blocking(SessionStore.head)
    head_history = _blocking(SessionStore.head_history)
    heads = _blocking(SessionStore.heads)
    import_head = _blocking(SessionStore.import_head)
    erase = _blocking(SessionStore.erase)
    erasures = _blocking(SessionStore.erasures)
    raw_lines = _streamed(SessionStore.raw_lines)
    raw_blocks = _streamed(SessionStore.raw_blocks)
    journals = _blocking(SessionStore.journals)

    def import_session(
        self, header: str, entries: Iterable[str], *, after: int | None = None
    ) -> int:
        """`SessionStore.import_session`, reading ``entries`` (any iterable of
        lines, such as an open file's, newlines stripped) as it stores them."""
        return self._loop.run(self._target.import_session(header, _lines(entries), after=after))

    def journal(self, name: str, *, durability: JournalDurability = "full") -> SyncJournal:
        """`CoreStore.journal`, as a `SyncJournal` whose methods block."""
        return SyncJournal(self._target.journal(name, durability=durability), self._loop)

    def scoped(self, owner: str, *, remember: int = 0) -> SyncScopedStore:
        """`ScopedStore` of this store for ``owner``, its methods blocking on this
        object's loop; closing it leaves this store open.

        Raises:
            ConfigurationError: as `ScopedStore`.
        """
        return SyncScopedStore(ScopedStore(self._target, owner, remember=remember), self._loop)

    def drop_caches(self) -> None:
        """`CoreStore.drop_caches` of the store underneath."""
        self._target.drop_caches()

    def close(self) -> None:
        """Close the store, then stop its loop; closing twice is fine.

        Calls in flight in other threads (a stream being read, an append
        waiting for its commit) end with `ClosedError` (a `StorageError`), as
        every call made afterwards does; none is left waiting.
        """
        self._loop.stop(self._target.close())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class SyncScopedStore(SyncStore):
    """A `SyncStore` over a `ScopedStore` (`SyncStore.scoped`): the store as one
    owner sees it. It shares the loop of the sync store it came from, which
    stays open when this one closes."""

    def __repr__(self) -> str:
        return f"SyncScopedStore({self._target!r})"

    def close(self) -> None:
        """Close the view (every later call raises `StorageError`); the store stays open."""
        with contextlib.suppress(ClosedError):  # the store's loop stopped first: closed too
            self._loop.run(self._target.close())


class SyncJournal(_Facade[SessionJournal]):
    """A journal whose methods block; see `sessionstore.store.SessionJournal`."""

    read = _blocking(SessionJournal.read)
    begin = _blocking(SessionJournal.begin)
    append = _blocking(SessionJournal.append)
    append_raw = _blocking(SessionJournal.append_raw)
    read_bytes = _blocking(SessionJournal.read_bytes)
    clear = _blocking(SessionJournal.clear)
    erase = _blocking(SessionJournal.erase)
    keyed = _blocking(SessionJournal.keyed)
    scan = _blocking(SessionJournal.scan)
    drop = _blocking(SessionJournal.drop)

    def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[dict[str, builtins.list[bytes]]], _T | None],
        *lines: bytes,
    ) -> _T | None:
        """Blocking form of `SessionJournal.append_keyed_unless`."""
        return self._loop.run(self._target.append_keyed_unless(keys, found, *lines))

    @property
    def effects(self) -> SyncEffects:
        """The journal's side effects; see `sessionstore.effects.EffectLog`."""
        return SyncEffects(self._target.effects, self._loop)


class _Interrupted(BaseException):
    """A ``SystemExit`` or ``KeyboardInterrupt`` an effect raised, carried
    out of the store's loop (which either would stop) to the caller. Not an
    `Exception`: the effect is left in doubt, as a kill would leave it."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(raised)
        self.raised = raised


def _in_thread(call: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """``call`` (an effect or a check, plain or async), run in a worker
    thread; what it returns awaited when it is awaitable."""

    async def called(*args: Any) -> Any:
        try:
            result = await asyncio.to_thread(call, *args)
        except (SystemExit, KeyboardInterrupt) as exc:
            raise _Interrupted(exc) from None
        return await result if inspect.isawaitable(result) else result

    return called


class SyncEffects(_Facade[EffectLog]):
    """A journal's effects whose methods block; see `sessionstore.effects.EffectLog`.

    `once` runs the effect (and a ``check``) in a worker thread of the
    store's loop, while the calling thread waits: the loop stays free for
    the store's other users meanwhile.
    """

    def once(
        self,
        call: Callable[[], Any],
        *,
        tool: str,
        args: Any = None,
        key: str | None = None,
        session: str | None = None,
        call_id: str | None = None,
        check: Callable[[Effect], Any] | None = None,
        idempotent: bool = False,
        retries: int = 0,
        backoff: Backoff = 1.0,
        dead_letter: int | None = DEAD_LETTER_AFTER,
    ) -> Any:
        """`EffectLog.once`, blocking; without ``timeout``: a call run in a
        thread cannot be stopped, so an attempt given up on would run on
        beside the next."""
        try:
            return self._loop.run(
                self._target.once(
                    _in_thread(call),
                    tool=tool,
                    args=args,
                    key=key,
                    session=session,
                    call_id=call_id,
                    check=None if check is None else _in_thread(check),
                    idempotent=idempotent,
                    retries=retries,
                    backoff=backoff,
                    dead_letter=dead_letter,
                )
            )
        except _Interrupted as interrupted:  # raised here, in the caller's thread
            raise interrupted.raised from None

    settle = _blocking(EffectLog.settle)
    read = _blocking(EffectLog.read)
    by_session = _blocking(EffectLog.by_session)
    in_doubt = _blocking(EffectLog.in_doubt)
    find = _blocking(EffectLog.find)
    result = _blocking(EffectLog.result)
    forget = _blocking(EffectLog.forget)


def effects_in_doubt(store: SyncStore) -> list[JournalEffect]:
    """`sessionstore.effects_in_doubt` of a blocking store: every effect in
    doubt or dead-lettered, of every journal, asked before serving."""
    return store.run(async_effects_in_doubt)


def forget_effects(
    store: SyncStore, before: str | datetime | Timestamp, *, reason: str, by: str | None = None
) -> dict[str, list[Effect]]:
    """`sessionstore.forget_effects` of a blocking store."""
    return store.run(partial(async_forget_effects, before=before, reason=reason, by=by))


def open_store(target: str | os.PathLike[str], **options: Any) -> SyncStore:
    """Open a store for blocking use: `sessionstore.open_store`'s targets and
    options, the store's methods as plain calls. Close it, or use it as a
    context manager (``with open_store(...) as store:``).

    Raises:
        ConfigurationError, StorageError, SchemaError: as `sessionstore.open_store`.
    """
    return SyncStore.wrap(_opened(target, options))


async def _opened(target: str | os.PathLike[str], options: dict[str, Any]) -> SessionStore:
    return await open_async_store(target, **options)
