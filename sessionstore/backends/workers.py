"""Threads of one store running its blocking calls: `Workers`.

A store that waits on files or a driver does it in threads of its own,
never on an event loop. Each call is one hop: the call put on a queue, its
result handed back to the loop that awaits it (``call_soon_threadsafe``),
half the loop's work of ``asyncio.to_thread`` (no context copied, no
concurrent future chained); so one store serves any number of threads and
event loops.

Few threads, and why. While a worker runs Python the event loop's thread
waits for the GIL, and it waits longer the more threads compete for it:
a store runs a few, enough for a slow ``fsync`` or query not to hold up
the rest, rather than one per core and then some (``to_thread``'s pool).

Keyed workers (``keyed=True``): each thread has its own queue and a call
goes to the thread its key picks (a session's id), so the calls of one key
run one after another in the order they were made, while other keys' run
(and ``fsync``) beside them. Otherwise all threads take from one queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import zlib
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["Workers", "WorkersStopped"]

_T = TypeVar("_T")

_Job = tuple[Callable[[], Any], "asyncio.Future[Any]"]


class WorkersStopped(RuntimeError):
    """A call was made after its workers stopped (their store closed)."""


def _resolve(future: asyncio.Future[_T], result: _T, error: BaseException | None) -> None:
    if future.done():
        return  # its caller was cancelled; what the call did stands
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    # A function of the queue alone: a thread holds no reference to the
    # store, which can then be collected (and its workers stopped) unclosed.
    while (job := jobs.get()) is not None:
        fn, future = job
        del job
        result, error = None, None
        try:
            result = fn()
        except BaseException as exc:  # the caller's to handle, whatever it is
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed: no one to tell
            future.get_loop().call_soon_threadsafe(_resolve, future, result, error)
        del fn, future, result, error


class Workers:
    """``count`` threads, started at the first call, stopped by `stop`."""

    def __init__(self, count: int, name: str, *, keyed: bool = False) -> None:
        if count < 1:
            raise ValueError(f"workers need at least one thread, not {count}")
        self._count = count
        self._name = name
        self._keyed = keyed
        self._queues: list[queue.SimpleQueue[_Job | None]] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # held while starting or stopping, never across a call
        self._stopped = False
        self._pid = 0  # the process that started the threads: a forked child has none

    def _start(self) -> None:
        self._queues, self._threads, self._pid = [], [], os.getpid()
        shared: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        for n in range(self._count):
            jobs = queue.SimpleQueue() if self._keyed else shared
            thread = threading.Thread(
                target=_work, args=(jobs,), name=f"{self._name}-{n}", daemon=True
            )
            thread.start()
            self._queues.append(jobs)
            self._threads.append(thread)

    def call(self, fn: Callable[[], _T], key: Hashable = None) -> asyncio.Future[_T]:
        """Run ``fn()`` in a worker (the one ``key`` picks, when keyed)."""
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        with self._lock:  # never a call queued behind the end of the threads
            if self._stopped:
                raise WorkersStopped(f"the {self._name} threads are stopped")
            if self._pid != os.getpid():  # first call, or the first in a forked child
                self._start()
            if self._keyed and key is not None:
                # A stable pick (hash() is salted per process for strings).
                at = zlib.crc32(str(key).encode()) % self._count
            else:
                at = 0
            self._queues[at].put((fn, future))
        return future

    def stop(self, *, wait: bool = True) -> None:
        """Let the calls queued finish, then end the threads (joined, with
        ``wait``); a call made after raises `WorkersStopped`."""
        with self._lock:
            self._stopped = True
            threads = self._threads
            for jobs in self._queues:  # one end for each thread
                jobs.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
