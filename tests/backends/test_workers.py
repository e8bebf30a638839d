"""A store's worker threads: results, errors and cancellation reach the loop,
keyed calls keep their order, a call after the end is refused."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from functools import partial

import pytest

from sessionstore.backends.workers import Workers, WorkersStopped


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


def test_no_thread_runs_before_the_first_call() -> None:
    before = set(threading.enumerate())
    workers = Workers(3, "test-unstarted")
    assert set(threading.enumerate()) == before
    workers.stop()  # nothing to end


async def test_a_call_after_stop_is_refused() -> None:
    workers = Workers(2, "test-workers")
    assert await workers.call(lambda: 1) == 1
    await asyncio.to_thread(workers.stop)
    with pytest.raises(WorkersStopped, match="test-workers"):
        workers.call(lambda: 2)


async def test_keyed_calls_of_one_key_run_in_order_one_at_a_time() -> None:
    workers = Workers(3, "test-keyed", keyed=True)
    try:
        guard = threading.Lock()
        running: set[str] = set()
        overlaps: list[str] = []
        ran: list[tuple[str, int, str]] = []

        def note(key: str, n: int) -> None:
            with guard:
                if key in running:
                    overlaps.append(key)
                running.add(key)
            time.sleep(0.0005)  # room for another call of the key to start, were it let
            with guard:
                running.discard(key)
                ran.append((key, n, threading.current_thread().name))

        calls = [workers.call(partial(note, key, n), key) for n in range(30) for key in "abcdef"]
        await asyncio.gather(*calls)
        assert overlaps == []
        for key in "abcdef":
            assert [n for found, n, _ in ran if found == key] == list(range(30))
        assert len({thread for _, _, thread in ran}) > 1  # the keys spread over the threads
    finally:
        await asyncio.to_thread(workers.stop)


async def test_a_key_waiting_holds_up_no_other_key() -> None:
    workers = Workers(2, "test-keyed", keyed=True)
    release = threading.Event()
    try:
        blocked = workers.call(lambda: release.wait(30), "k0")
        others = [workers.call(partial(str, n), f"k{n}") for n in range(1, 21)]
        # Every other key, whichever thread it would once have been pinned to.
        done, _ = await asyncio.wait(others, timeout=30)
        assert len(done) == len(others)
        assert not blocked.done()
        release.set()
        assert await blocked is True
    finally:
        release.set()
        await asyncio.to_thread(workers.stop)


async def test_stop_waits_for_a_key_queued_behind_a_running_call() -> None:
    workers = Workers(2, "test-keyed", keyed=True)
    release = threading.Event()
    first = workers.call(lambda: release.wait(30), "k")
    second = workers.call(lambda: "after", "k")
    stopping = asyncio.ensure_future(asyncio.to_thread(workers.stop))
    await asyncio.sleep(0)
    release.set()
    await stopping
    assert await first is True
    assert await second == "after"


def _forked(call: Callable[[Callable[[], int]], Coroutine[object, object, int]]) -> int:
    """Fork; the child makes ``call(os.getpid)`` and exits 0 if it got its own
    pid back, 1 otherwise. The child's pid, in the parent."""
    child = os.fork()
    if child == 0:
        ran = False
        try:
            ran = asyncio.run(call(os.getpid)) == os.getpid()
        finally:
            os._exit(0 if ran else 1)  # never back into pytest
    return child


def test_a_forked_child_runs_its_calls_in_threads_of_its_own() -> None:
    workers = Workers(1, "test-fork")

    async def call(fn: Callable[[], int]) -> int:
        return await asyncio.wait_for(workers.call(fn), 5)

    assert asyncio.run(call(threading.get_ident)) != threading.get_ident()
    child = _forked(call)  # the parent's thread is not in the child
    _, status = os.waitpid(child, 0)
    workers.stop()
    assert os.waitstatus_to_exitcode(status) == 0


async def test_a_keyed_call_that_raises_leaves_its_key_served() -> None:
    workers = Workers(2, "test-keyed", keyed=True)
    try:

        def interrupted() -> None:
            raise KeyboardInterrupt  # whatever a call raises, the caller's

        failing = workers.call(interrupted, "k")
        after = workers.call(lambda: "next", "k")
        with pytest.raises(KeyboardInterrupt):
            await asyncio.shield(failing)
        assert await after == "next"
    finally:
        await asyncio.to_thread(workers.stop)


def test_a_child_forked_while_a_parent_thread_queues_a_call_makes_calls_of_its_own() -> None:
    workers = Workers(1, "test-fork")

    async def call(fn: Callable[[], int]) -> int:
        return await asyncio.wait_for(workers.call(fn), 5)

    assert asyncio.run(call(threading.get_ident)) != threading.get_ident()
    held, release = threading.Event(), threading.Event()

    def queueing() -> None:  # a thread of the parent's, caught at fork inside a call
        with workers._calls.lock:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=queueing)
    thread.start()
    held.wait(30)
    child = _forked(call)  # the lock stays held in the child: no thread there lets it go
    release.set()
    thread.join()
    for _ in range(300):  # the child waiting for the lock for good: killed, and failed
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        _, status = os.waitpid(child, 0)
    workers.stop()
    assert os.waitstatus_to_exitcode(status) == 0


async def test_keyed_calls_of_no_key_run_in_order_one_at_a_time() -> None:
    workers = Workers(3, "test-keyed", keyed=True)
    try:
        guard = threading.Lock()
        running: list[int] = []
        overlaps: list[int] = []
        ran: list[int] = []

        def note(n: int) -> None:
            with guard:
                overlaps.extend(running)
                running.append(n)
            time.sleep(0.0005)  # room for another call to start, were it let
            with guard:
                running.remove(n)
                ran.append(n)

        await asyncio.gather(*(workers.call(partial(note, n)) for n in range(40)))
        assert overlaps == []
        assert ran == list(range(40))
    finally:
        await asyncio.to_thread(workers.stop)
