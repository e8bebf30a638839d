"""A SQLite store used from many threads, each running an event loop of its own.

What ``asyncio.run`` in a new thread per request does (``Runner.run_sync``
in worker threads, a sync web view calling async code): the store outlives
the threads, and each thread's loop gets a connection of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionstore import SessionMeta, SessionStore, open_store
from sessionstore.backends.sql import SqlStore
from sessionstore.testing.contract import message


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = asyncio.run(open_store(tmp_path / "s.db"))
    yield opened
    asyncio.run(opened.close())


def open_connections(store: SessionStore) -> int:
    assert isinstance(store, SqlStore)
    return len(store.database.runner.connections())


def in_new_threads(count: int, work: object, *, at_once: bool) -> list[BaseException]:
    """Run ``asyncio.run(work(n))`` in ``count`` new threads, one after another
    or all at once; the errors they raised."""
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            asyncio.run(work(n))  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
        if not at_once:
            thread.join(timeout=120)
    for thread in threads:
        thread.join(timeout=120)  # a guard against a hang, never reached when it works
    assert not any(thread.is_alive() for thread in threads), "a thread hangs"
    return errors


def test_threads_that_ended_leave_no_connection_behind(store: SessionStore) -> None:
    session = asyncio.run(store.create(SessionMeta(id="s")))

    async def turn(n: int) -> None:
        await store.append(session, message(f"e{n}", "x"))
        assert await store.head("nothing") is None
        await store.load_context(session)

    # More threads than the connection pool holds: each leaves its loop's
    # connection, which must be closed once its thread has ended.
    assert in_new_threads(40, turn, at_once=False) == []
    assert [entry.id for entry in asyncio.run(store.load(session))] == [f"e{n}" for n in range(40)]
    assert open_connections(store) <= 8  # the workers' own, and a few threads' at most


def test_more_threads_at_once_than_the_pool_holds_all_get_a_connection(
    store: SessionStore,
) -> None:
    session = asyncio.run(store.create(SessionMeta(id="s")))
    barrier = threading.Barrier(24)

    async def turn(n: int) -> None:
        assert await store.head("nothing") is None
        await asyncio.to_thread(barrier.wait, 60)  # every thread's connection open at once
        await store.append(session, message(f"e{n}", "x"))

    assert in_new_threads(24, turn, at_once=True) == []
    assert len(asyncio.run(store.load(session))) == 24
