"""`compact` racing appends: no entry is left out of both the summary and the context.

A compaction reads the context, then appends itself only if the session
still ends where it read it. Each test makes another writer land between
the read and the write (through the store's one read behind `compact`),
on every backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sessionstore import (
    CompactionEntry,
    SessionConflictError,
    SessionMeta,
    SessionStore,
    open_store,
)
from sessionstore.backends.base import COMPACT_ATTEMPTS, StoreBase
from sessionstore.testing.contract import compaction, message
from tests.kinds import STORE_KINDS, StoreTargets


@pytest.fixture(params=STORE_KINDS)
async def stores(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[tuple[StoreBase, SessionStore]]:
    """The compacting store, and another writer on the same storage."""
    target = store_targets.new(request.param)
    async with await open_store(target) as store:
        assert isinstance(store, StoreBase)
        if request.param == "memory":  # its storage is the object itself
            yield store, store
            return
        async with await open_store(target) as other:
            yield store, other


def between_read_and_write(
    store: StoreBase, monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[int], Awaitable[None]]
) -> list[int]:
    """Run ``meanwhile(n)`` after the store's n-th read of a context (from 1);
    the reads counted are returned, filled as they happen."""
    reads: list[int] = []
    read = store._built_context

    async def racing_read(session_id: str) -> Any:
        built = await read(session_id)
        reads.append(len(reads) + 1)
        await meanwhile(reads[-1])
        return built

    monkeypatch.setattr(store, "_built_context", racing_read)
    return reads


async def texts(store: SessionStore, session_id: str) -> list[str]:
    return [m.text() for m in await store.load_context(session_id)]


@pytest.mark.parametrize("keep_last", [0, 1, 2])
async def test_a_message_appended_during_a_compaction_stays_in_the_context(
    stores: tuple[StoreBase, SessionStore], monkeypatch: pytest.MonkeyPatch, keep_last: int
) -> None:
    store, other = stores
    session = await store.create(SessionMeta.new())
    await store.append_many(session, [message(f"e{n}", f"m{n}") for n in range(1, 5)])

    async def append_once(read: int) -> None:
        if read == 1:
            await other.append(session, message("late", "arrived meanwhile"))

    reads = between_read_and_write(store, monkeypatch, append_once)
    entry = await store.compact(session, "the summary", keep_last=keep_last)
    assert reads == [1, 2]  # lost the race once, then read again
    kept = [f"m{n}" for n in range(5 - keep_last, 5)]
    assert await texts(store, session) == [
        "[Conversation summary]\nthe summary",
        *kept,
        "arrived meanwhile",
    ]
    entries = await store.load(session)
    assert [e.id for e in entries][-2:] == ["late", entry.id]  # nothing written twice


async def test_a_compaction_landing_meanwhile_is_a_conflict_and_nothing_is_written(
    stores: tuple[StoreBase, SessionStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, other = stores
    session = await store.create(SessionMeta.new())
    await store.append_many(session, [message(f"e{n}", f"m{n}") for n in range(1, 5)])

    async def compact_once(read: int) -> None:
        if read == 1:
            await other.append(session, compaction("theirs", "their summary", "e3"))

    between_read_and_write(store, monkeypatch, compact_once)
    with pytest.raises(SessionConflictError, match="compacted by another writer"):
        await store.compact(session, "ours", keep_last=1)
    entries = await store.load(session)
    assert entries[-1].id == "theirs"
    assert sum(isinstance(e, CompactionEntry) for e in entries) == 1


async def test_a_compaction_losing_every_race_gives_up_with_nothing_written(
    stores: tuple[StoreBase, SessionStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, other = stores
    session = await store.create(SessionMeta.new())
    await store.append(session, message("e1", "m1"))

    async def append_always(read: int) -> None:
        await other.append(session, message(f"late{read}", f"late {read}"))

    reads = between_read_and_write(store, monkeypatch, append_always)
    with pytest.raises(SessionConflictError) as caught:
        await store.compact(session, "never", keep_last=0)
    assert len(reads) == COMPACT_ATTEMPTS
    assert caught.value.expected == f"late{COMPACT_ATTEMPTS - 1}"
    assert not any(isinstance(e, CompactionEntry) for e in await store.load(session))
