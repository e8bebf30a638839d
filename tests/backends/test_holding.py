"""`Holding`: what a task holds is let go after its last call, never beside
it: in the call's thread once a cancelled call ends, in its place when it
had not started, on the loop when its pool dropped it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sessionstore.backends.holding import Holding
from sessionstore.backends.workers import Workers, WorkersStopped


@pytest.fixture
def workers() -> Iterator[Workers]:
    made = Workers(2, "test-holding", keyed=True)
    yield made
    made.stop()


class Log:
    """What ran, and in which thread, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, threading.Thread]] = []

    def note(self, what: str) -> Callable[[], str]:
        def noted() -> str:
            with self.lock:
                self.seen.append((what, threading.current_thread()))
            return what

        return noted

    def names(self) -> list[str]:
        with self.lock:
            return [what for what, _ in self.seen]

    def thread(self, what: str) -> threading.Thread:
        with self.lock:
            return next(thread for name, thread in self.seen if name == what)


def keyed(workers: Workers) -> Callable[[Callable[[], Any]], Any]:
    return lambda fn: workers.call(fn, "k")


async def until(done: Callable[[], bool]) -> None:
    for _ in range(3000):  # a guard against a hang, about 30 s
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never")


async def test_calls_return_their_results_and_end_lets_go_in_a_thread(workers: Workers) -> None:
    log, holding = Log(), Holding(keyed(workers))
    assert await holding.call(log.note("call")) == "call"
    await holding.end(log.note("release"))
    assert log.names() == ["call", "release"]
    assert log.thread("release") is not threading.current_thread()


async def test_let_go_after_a_call_that_ended_runs_at_once_here(workers: Workers) -> None:
    log, holding = Log(), Holding(keyed(workers))
    await holding.call(log.note("call"))
    holding.let_go(log.note("release"))
    assert log.names() == ["call", "release"]
    assert log.thread("release") is threading.current_thread()


async def test_a_call_cancelled_while_it_runs_lets_go_in_its_thread_after_it(
    workers: Workers,
) -> None:
    log, holding, go, started = Log(), Holding(keyed(workers)), threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        go.wait()
        log.note("call")()

    calling = asyncio.ensure_future(holding.call(held))
    try:
        await until(started.is_set)
        calling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await calling
        await holding.end(log.note("release"))  # not waited for: the call runs on
        assert log.names() == []
    finally:
        go.set()
    await until(lambda: len(log.names()) == 2)
    assert log.names() == ["call", "release"]
    assert log.thread("release") is log.thread("call")


async def test_a_call_cancelled_before_it_started_is_not_run_and_lets_go_in_its_place(
    workers: Workers,
) -> None:
    log, holding, go = Log(), Holding(keyed(workers)), threading.Event()
    blocking = workers.call(go.wait, "k")  # the key's next call waits behind it
    calling = asyncio.ensure_future(holding.call(log.note("call")))
    try:
        for _ in range(5):
            await asyncio.sleep(0)
        calling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await calling
        holding.let_go(log.note("release"))  # not here: a call is still to come
        assert log.names() == []
    finally:
        go.set()
    await blocking
    await until(lambda: bool(log.names()))
    assert await workers.call(log.names, "k") == ["release"]  # the key's calls all ran
    assert log.thread("release") is not threading.current_thread()


async def test_a_call_its_pool_dropped_lets_go_on_the_loop() -> None:
    log = Log()
    pool: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def dropping(fn: Callable[[], Any]) -> Any:
        return await pool  # cancelled by its pool: ``fn`` never runs

    holding = Holding(dropping)
    calling = asyncio.ensure_future(holding.call(log.note("call")))
    for _ in range(5):
        await asyncio.sleep(0)
    calling.cancel()
    with pytest.raises(asyncio.CancelledError):
        await calling
    holding.let_go(log.note("release"))
    assert log.names() == []  # the call may still run
    pool.cancel()
    await until(lambda: bool(log.names()))
    assert log.names() == ["release"]
    assert log.thread("release") is threading.current_thread()
    await holding.end(log.note("again"))  # dropped: no thread to follow, run here
    assert log.names() == ["release", "again"]


async def test_a_call_refused_before_it_started_lets_go_at_once(workers: Workers) -> None:
    log, holding = Log(), Holding(keyed(workers))
    await holding.call(log.note("call"))
    workers.stop()  # the next call is refused: its threads are stopped
    with pytest.raises(WorkersStopped):
        await holding.call(log.note("refused"))
    holding.let_go(log.note("release"))
    assert log.names() == ["call", "release"]
