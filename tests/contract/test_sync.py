"""The contract suite through the blocking facade (`sessionstore.sync`).

Each async method of the store the suite sees is a `SyncStore` call made in
a worker thread: every rule the suite proves holds for the blocking API too.
The facade does the same for every kind of store, so the store suite runs
through it on memory and SQLite (the journal suite on JSONL as well); the
suite on the stores themselves proves each backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any, Self

import pytest

from sessionstore import Capability, SessionStore
from sessionstore.store import SessionJournal
from sessionstore.sync import SyncJournal, SyncStore, open_store
from sessionstore.testing import (
    Backend,
    JournalBackend,
    SessionJournalContract,
    SessionStoreContract,
)
from tests.kinds import StoreTargets

_END = object()


async def _streamed(items: Iterator[Any]) -> AsyncIterator[Any]:
    try:
        while (item := await asyncio.to_thread(next, items, _END)) is not _END:
            yield item
    finally:
        await asyncio.to_thread(items.close)  # type: ignore[attr-defined]


class _Calls:
    """Every method of the object underneath, called in a worker thread."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


class _JournalCalls(_Calls):
    """A `SyncJournal`'s methods, and its effects', each called in a worker thread."""

    @property
    def effects(self) -> _Calls:
        return _Calls(self._target.effects)


class AsyncOverSync(_Calls):
    """The async store protocol, each call going through a `SyncStore`."""

    def __init__(self, sync: SyncStore) -> None:
        super().__init__(sync)
        self.sync = sync

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.sync.capabilities

    def iter_entries(self, session_id: str) -> AsyncIterator[Any]:
        return _streamed(self.sync.iter_entries(session_id))

    def raw_lines(self, session_id: str) -> AsyncIterator[Any]:
        return _streamed(self.sync.raw_lines(session_id))

    def raw_blocks(self, session_id: str) -> AsyncIterator[Any]:
        return _streamed(self.sync.raw_blocks(session_id))

    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        lines = [line async for line in entries]
        return await asyncio.to_thread(self.sync.import_session, header, lines, after=after)

    def journal(self, name: str, *, durability: Any = "full") -> _JournalCalls:
        journal: SyncJournal = self.sync.journal(name, durability=durability)
        return _JournalCalls(journal)

    def drop_caches(self) -> None:
        self.sync.drop_caches()

    def scoped(self, owner: str) -> AsyncOverSync:
        """The facade's view for ``owner`` (`SyncStore.scoped`), called likewise."""
        return AsyncOverSync(self.sync.scoped(owner))

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _sync_backend(store_targets: StoreTargets, kind: str) -> Backend:
    inner = store_targets.backend(kind)
    target = store_targets.new(kind) if kind != "memory" else "memory://"
    shared: list[AsyncOverSync] = []

    async def opened() -> SessionStore:
        if kind == "memory" and shared:  # the storage is the store object itself
            return shared[0]  # type: ignore[return-value]
        store = AsyncOverSync(await asyncio.to_thread(open_store, target))
        shared.append(store)
        return store  # type: ignore[return-value]

    return Backend(open=opened, persistent=inner.persistent, damage=None)


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, store_targets: StoreTargets) -> Backend:
    return _sync_backend(store_targets, request.param)


class TestThroughTheSyncFacade(SessionStoreContract):
    pass


@pytest.fixture(params=["memory", "sqlite", "jsonl"])
async def journal_backend(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[JournalBackend]:
    target = store_targets.new(request.param)
    stores = [await asyncio.to_thread(open_store, target)]  # one store: memory's storage

    async def opened() -> SessionJournal:
        return _JournalCalls(stores[0].journal("agent-1"))  # type: ignore[return-value,unused-ignore]

    yield JournalBackend(open=opened)
    for store in stores:
        await asyncio.to_thread(store.close)


class TestJournalsThroughTheSyncFacade(SessionJournalContract):
    pass
