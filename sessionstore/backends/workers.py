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

Keyed workers (``keyed=True``): the calls of one key (a session's id) run
one at a time in the order they were made, in whichever thread is free,
while other keys' run (and ``fsync``) beside them; a key whose call waits
(a file locked by another process) holds one thread, never the keys
behind it. Otherwise the calls run as they come, as many at once as
there are threads.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import threading
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


class _Calls:
    """The calls waiting, by key, and the keys ready to run; shared by the
    threads (which hold no reference to the `Workers`, so that a store can
    be collected, and its threads stopped, unclosed)."""

    def __init__(self) -> None:
        # Reentrant: a store dropped unclosed while its lock is held here
        # (its last call let go, a collection of cycles) stops these calls.
        self.lock = threading.RLock()
        self.ready = threading.Condition(self.lock)
        self.keys: collections.deque[Hashable] = collections.deque()  # ready to run
        # A key's calls not yet taken, in order; a key is here while one runs.
        self.waiting: dict[Hashable, collections.deque[_Job]] = {}
        self.stopped = False

    def put(self, key: Hashable, job: _Job) -> None:
        """Queue ``job`` behind the calls of ``key`` (the lock held)."""
        calls = self.waiting.get(key)
        if calls is None:  # none queued nor running: ready at once
            self.waiting[key] = collections.deque((job,))
            self.keys.append(key)
            self.ready.notify()
        else:
            calls.append(job)

    def take(self) -> tuple[Hashable, _Job] | None:
        """The next call of the next key ready; None once stopped with no call left."""
        with self.lock:
            while not self.keys:
                if self.stopped and not self.waiting:
                    self.ready.notify_all()  # the other threads end too
                    return None
                self.ready.wait()
            key = self.keys.popleft()
            return key, self.waiting[key].popleft()  # let go by the thread, not here

    def done(self, key: Hashable) -> None:
        """The call of ``key`` taken has run: its next one is ready, if any."""
        with self.lock:
            calls = self.waiting[key]
            if calls:
                self.keys.append(key)  # behind the keys already ready: each has its turn
                self.ready.notify()
            else:
                del self.waiting[key]
                if self.stopped and not self.waiting:
                    self.ready.notify_all()


def _work(calls: _Calls) -> None:
    while (taken := calls.take()) is not None:
        key, (fn, future) = taken
        del taken
        result, error = None, None
        try:
            result = fn()
        except BaseException as exc:  # the caller's to handle, whatever it is
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed: no one to tell
            future.get_loop().call_soon_threadsafe(_resolve, future, result, error)
        del fn, future, result, error
        calls.done(key)
        del key


class Workers:
    """``count`` threads, started at the first call, stopped by `stop`."""

    def __init__(self, count: int, name: str, *, keyed: bool = False) -> None:
        if count < 1:
            raise ValueError(f"workers need at least one thread, not {count}")
        self._count = count
        self._name = name
        self._keyed = keyed
        self._calls = _Calls()
        self._threads: list[threading.Thread] = []
        self._starting = threading.Lock()  # held while the threads start, never across a call
        self._pid = os.getpid()

    def _current(self) -> _Calls:
        """The calls of this process: a forked child has none of the
        parent's threads, and a lock of theirs may be held by one of them."""
        if self._pid != os.getpid():
            # Under no lock, the parent's being perhaps held for good: two
            # threads of the child making its first call at one instant
            # could each make new calls here (one set of threads left over).
            stopped = self._calls.stopped
            self._calls, self._threads, self._pid = _Calls(), [], os.getpid()
            self._calls.stopped = stopped
            self._starting = threading.Lock()
        return self._calls

    def call(self, fn: Callable[[], _T], key: Hashable = None) -> asyncio.Future[_T]:
        """Run ``fn()`` in a worker (after the calls of ``key`` made before, when keyed)."""
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        calls = self._current()
        if calls.stopped:
            raise WorkersStopped(f"the {self._name} threads are stopped")
        if not self._threads:
            with self._starting:  # threads started by a stop meanwhile end at once
                for n in range(len(self._threads), self._count):
                    name = f"{self._name}-{n}"
                    thread = threading.Thread(target=_work, args=(calls,), name=name, daemon=True)
                    thread.start()
                    self._threads.append(thread)
        with calls.lock:  # never a call queued behind the end of the threads
            if calls.stopped:
                raise WorkersStopped(f"the {self._name} threads are stopped")
            calls.put(key if self._keyed and key is not None else object(), (fn, future))
        return future

    def stop(self, *, wait: bool = True) -> None:
        """Let the calls queued finish, then end the threads (joined, with
        ``wait``); a call made after raises `WorkersStopped`."""
        calls = self._current()
        with calls.lock:
            calls.stopped = True
            calls.ready.notify_all()
        if wait:
            with self._starting:
                threads = list(self._threads)
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
