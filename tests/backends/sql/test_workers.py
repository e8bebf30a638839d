"""The SQLite store's worker threads: results, errors and cancellation reach the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from functools import partial

import pytest

from sessionstore.backends.sql.runner import Workers


@pytest.fixture
def workers() -> Iterator[Workers]:
    made = Workers(2, "test-workers")
    yield made
    made.stop()


async def test_a_call_runs_in_a_worker_thread_and_returns_its_result(workers: Workers) -> None:
    assert await workers.call(threading.current_thread) is not threading.current_thread()
    assert await workers.call(lambda: 42) == 42


async def test_an_error_reaches_its_caller_and_the_worker_goes_on(workers: Workers) -> None:
    def fail() -> None:
        raise ValueError("from the worker")

    with pytest.raises(ValueError, match="from the worker"):
        await workers.call(fail)
    assert [await workers.call(partial(int, n)) for n in range(4)] == [0, 1, 2, 3]


async def test_a_cancelled_caller_leaves_its_call_to_finish(workers: Workers) -> None:
    release, done = threading.Event(), threading.Event()

    def slow() -> str:
        release.wait(5)
        done.set()
        return "finished"

    waiting = asyncio.ensure_future(workers.call(slow))
    await asyncio.sleep(0)
    waiting.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await asyncio.to_thread(done.wait, 5)
    assert await workers.call(lambda: "still working") == "still working"


async def test_stop_lets_queued_calls_finish() -> None:
    workers = Workers(1, "test-workers")
    ran: list[int] = []
    futures = [workers.call(partial(ran.append, n)) for n in range(20)]
    await asyncio.to_thread(workers.stop)
    assert ran == list(range(20))
    await asyncio.gather(*futures)


def test_a_call_ending_after_its_loop_closed_leaves_the_worker_alive() -> None:
    workers = Workers(1, "test-workers")
    release = threading.Event()

    async def leave_a_call_running() -> None:
        workers.call(lambda: release.wait(5))

    asyncio.run(leave_a_call_running())  # the loop closes with the call still running
    release.set()

    async def call_again() -> str:
        return await asyncio.wait_for(workers.call(lambda: "alive"), 5)

    assert asyncio.run(call_again()) == "alive"
    workers.stop()
