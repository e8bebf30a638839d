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

It is a thin layer, not a second implementation: each `SyncStore` runs one
event loop in a thread of its own and hands every call to the async store
on it. Any number of threads may call one `SyncStore` at once (their
appends then share transactions, as concurrent tasks do); it may also be
called from code that runs inside an event loop of its own, which it
blocks for the call's duration. Errors are the async store's, unchanged.
Streams (`iter_entries`, `raw_lines`, `raw_blocks`) are generators: close
one you leave unfinished (or let it be collected) to let go of its file or
cursor.
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
from types import EllipsisType, TracebackType
from typing import Any, Self, TypeVar

from sessionstore.backends import open_store as open_async_store
from sessionstore.backends.checks import JournalDurability
from sessionstore.effects import EffectLog, EffectState, Settled
from sessionstore.errors import ClosedError, StorageError
from sessionstore.journal import Journal
from sessionstore.models import (
    CompactionEntry,
    Effect,
    Erasure,
    HeadMove,
    JournalLine,
    Message,
    SessionEntry,
    SessionHeader,
    SessionMeta,
    TitleChange,
)
from sessionstore.pairing import PairingDialect
from sessionstore.store import (
    Capability,
    EntrySlice,
    Order,
    SearchHit,
    SessionJournal,
    SessionStore,
    SessionSummary,
)

__all__ = ["SyncJournal", "SyncStore", "open_store"]

_T = TypeVar("_T")


class _Loop:
    """An event loop running in a daemon thread of its own, taking calls from any thread.

    Every call in flight is known, so that `stop` can end each one (its
    caller gets `StorageError`) instead of leaving its thread waiting for a
    loop that no longer runs.
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


class SyncStore:
    """A store whose methods block; see `sessionstore.store.SessionStore` for
    what each one does (same arguments, same results, same errors).

    Open one with `open_store`, or wrap an async store with `SyncStore.wrap`.
    """

    def __init__(self, store: SessionStore, loop: _Loop) -> None:
        """Use `open_store` or `wrap`."""
        self._store = store
        self._loop = loop

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
        return f"SyncStore({self._store!r})"

    @property
    def store(self) -> SessionStore:
        """The async store underneath (to be awaited only on this object's loop)."""
        return self._store

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The async store's `SessionStore.capabilities`."""
        return self._store.capabilities

    def run(self, call: Callable[[SessionStore], Awaitable[_T]]) -> _T:
        """Await ``call(store)`` on this object's loop, ``store`` being the async
        store underneath, and return what it returns: async code written
        against `SessionStore` (a `sessionstore.integrations.conversation.
        Conversation`, say), run from blocking code in one hop.

        Raises:
            whatever ``call`` raises; StorageError: the sync store is closed.
        """
        return self._loop.run(_called(call, self._store))

    # ------------------------------------------------------------ sessions

    def create(self, meta: SessionMeta) -> str:
        return self._loop.run(self._store.create(meta))

    def append(
        self,
        session_id: str,
        entry: SessionEntry,
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        append = self._store.append(
            session_id, entry, expect_last=expect_last, expect_head=expect_head
        )
        self._loop.run(append)

    def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        append = self._store.append_many(
            session_id, entries, expect_last=expect_last, expect_head=expect_head
        )
        self._loop.run(append)

    def load(self, session_id: str) -> builtins.list[SessionEntry]:
        return self._loop.run(self._store.load(session_id))

    def load_slice(self, session_id: str, start: int = 0, stop: int | None = None) -> EntrySlice:
        return self._loop.run(self._store.load_slice(session_id, start, stop))

    def iter_entries(self, session_id: str) -> Generator[SessionEntry, None, None]:
        return self._loop.stream(self._store.iter_entries(session_id))

    def load_context(
        self, session_id: str, *, repair: PairingDialect | None = None
    ) -> builtins.list[Message]:
        return self._loop.run(self._store.load_context(session_id, repair=repair))

    def load_context_with_ids(self, session_id: str) -> builtins.list[tuple[str, Message]]:
        return self._loop.run(self._store.load_context_with_ids(session_id))

    def compact(
        self,
        session_id: str,
        summary: str,
        *,
        keep_last: int,
        tokens_before: int | None = None,
        dialect: PairingDialect | None = None,
    ) -> CompactionEntry:
        return self._loop.run(
            self._store.compact(
                session_id,
                summary,
                keep_last=keep_last,
                tokens_before=tokens_before,
                dialect=dialect,
            )
        )

    def list(self) -> builtins.list[SessionMeta]:
        return self._loop.run(self._store.list())

    def summaries(
        self,
        *,
        owner: str | None = None,
        order: Order = "last_activity",
        limit: int | None = 50,
        after: str | None = None,
    ) -> builtins.list[SessionSummary]:
        return self._loop.run(
            self._store.summaries(owner=owner, order=order, limit=limit, after=after)
        )

    def search(
        self, text: str, *, owner: str | None = None, limit: int = 20, after: str | None = None
    ) -> builtins.list[SearchHit]:
        return self._loop.run(self._store.search(text, owner=owner, limit=limit, after=after))

    def set_title(self, session_id: str, title: str | None) -> TitleChange:
        return self._loop.run(self._store.set_title(session_id, title))

    def titles(self, session_id: str) -> builtins.list[TitleChange]:
        return self._loop.run(self._store.titles(session_id))

    def import_titles(
        self, session_id: str, changes: Sequence[TitleChange], *, after: int = 0
    ) -> int:
        return self._loop.run(self._store.import_titles(session_id, changes, after=after))

    def integrity(self) -> builtins.list[str]:
        return self._loop.run(self._store.integrity())

    # ------------------------------------------------------------ branches

    def fork(
        self, source_id: str, *, at: str | None = None, meta: SessionMeta | None = None
    ) -> SessionMeta:
        return self._loop.run(self._store.fork(source_id, at=at, meta=meta))

    def set_head(
        self,
        name: str,
        session_id: str,
        *,
        expect: str | EllipsisType | None = ...,
        expect_last: str | None = None,
    ) -> HeadMove:
        move = self._store.set_head(name, session_id, expect=expect, expect_last=expect_last)
        return self._loop.run(move)

    def head(self, name: str) -> str | None:
        return self._loop.run(self._store.head(name))

    def head_history(self, name: str) -> builtins.list[HeadMove]:
        return self._loop.run(self._store.head_history(name))

    def heads(self) -> builtins.list[str]:
        return self._loop.run(self._store.heads())

    def import_head(self, name: str, moves: Sequence[HeadMove], *, after: int = 0) -> int:
        return self._loop.run(self._store.import_head(name, moves, after=after))

    # ------------------------------------------------------------ lifecycle

    def erase(self, session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        return self._loop.run(self._store.erase(session_id, reason=reason, digest=digest))

    def erasures(self) -> builtins.list[Erasure]:
        return self._loop.run(self._store.erasures())

    # ------------------------------------------------------------ for tools

    def raw_lines(self, session_id: str) -> Generator[str, None, None]:
        return self._loop.stream(self._store.raw_lines(session_id))

    def raw_blocks(self, session_id: str) -> Generator[bytes, None, None]:
        return self._loop.stream(self._store.raw_blocks(session_id))

    def import_session(
        self, header: str, entries: Iterable[str], *, after: int | None = None
    ) -> int:
        """`SessionStore.import_session`, reading ``entries`` (any iterable of
        lines, such as an open file's, newlines stripped) as it stores them."""
        return self._loop.run(self._store.import_session(header, _lines(entries), after=after))

    def journal(self, name: str, *, durability: JournalDurability = "full") -> SyncJournal:
        return SyncJournal(self._store.journal(name, durability=durability), self._loop)

    def journals(self) -> builtins.list[str]:
        return self._loop.run(self._store.journals())

    def drop_caches(self) -> None:
        self._store.drop_caches()

    def close(self) -> None:
        """Close the store, then stop its loop; closing twice is fine.

        Calls in flight in other threads (a stream being read, an append
        waiting for its commit) end with `StorageError`, as every call made
        afterwards does; none is left waiting.
        """
        self._loop.stop(self._store.close())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class SyncJournal:
    """A journal whose methods block; see `sessionstore.store.SessionJournal`."""

    def __init__(self, journal: SessionJournal, loop: _Loop) -> None:
        self._journal = journal
        self._loop = loop

    def read(self) -> Journal:
        return self._loop.run(self._journal.read())

    def begin(self, header: SessionHeader, leftover: Journal) -> None:
        self._loop.run(self._journal.begin(header, leftover))

    def append(self, line: JournalLine) -> None:
        self._loop.run(self._journal.append(line))

    def append_raw(self, *lines: bytes) -> None:
        self._loop.run(self._journal.append_raw(*lines))

    def read_bytes(self) -> bytes:
        return self._loop.run(self._journal.read_bytes())

    def clear(self) -> None:
        self._loop.run(self._journal.clear())

    def erase(self, *, reason: str) -> Erasure | None:
        return self._loop.run(self._journal.erase(reason=reason))

    def keyed(self, *keys: str) -> dict[str, list[bytes]]:
        return self._loop.run(self._journal.keyed(*keys))

    def scan(
        self, prefix: str, *, before: str | None = None, limit: int | None = None
    ) -> list[tuple[str, list[bytes]]]:
        return self._loop.run(self._journal.scan(prefix, before=before, limit=limit))

    def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[dict[str, list[bytes]]], _T | None],
        *lines: bytes,
    ) -> _T | None:
        return self._loop.run(self._journal.append_keyed_unless(keys, found, *lines))

    def drop(self, *keys: str, reason: str) -> Erasure | None:
        return self._loop.run(self._journal.drop(*keys, reason=reason))

    @property
    def effects(self) -> SyncEffects:
        """The journal's side effects; see `sessionstore.effects.EffectLog`."""
        return SyncEffects(self._journal.effects, self._loop)


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


class SyncEffects:
    """A journal's effects whose methods block; see `sessionstore.effects.EffectLog`.

    `once` runs the effect (and a ``check``) in a worker thread of the
    store's loop, while the calling thread waits: the loop stays free for
    the store's other users meanwhile.
    """

    def __init__(self, effects: EffectLog, loop: _Loop) -> None:
        self._effects = effects
        self._loop = loop

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
    ) -> Any:
        try:
            return self._loop.run(
                self._effects.once(
                    _in_thread(call),
                    tool=tool,
                    args=args,
                    key=key,
                    session=session,
                    call_id=call_id,
                    check=None if check is None else _in_thread(check),
                    idempotent=idempotent,
                )
            )
        except _Interrupted as interrupted:  # raised here, in the caller's thread
            raise interrupted.raised from None

    def settle(
        self,
        key: str,
        outcome: Settled,
        *,
        reason: str,
        result: Any = None,
        by: str | None = None,
    ) -> Effect:
        return self._loop.run(
            self._effects.settle(key, outcome, reason=reason, result=result, by=by)
        )

    def read(self) -> builtins.list[EffectState]:
        return self._loop.run(self._effects.read())

    def by_session(self) -> dict[str | None, builtins.list[EffectState]]:
        return self._loop.run(self._effects.by_session())

    def in_doubt(self) -> builtins.list[EffectState]:
        return self._loop.run(self._effects.in_doubt())

    def find(self, key: str) -> EffectState | None:
        return self._loop.run(self._effects.find(key))

    def result(self, key: str) -> Any:
        return self._loop.run(self._effects.result(key))


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
