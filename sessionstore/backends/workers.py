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
import queue
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


_END = object()  # to a thread: no call is left, and none will come (None is a key)


class _Calls:
    """The calls waiting, by key, and the keys ready to run; shared by the
    threads (which hold no reference to the `Workers`, so that a store can
    be collected, and its threads stopped, unclosed).

    A key is ready (in ``keys``, once) or running (in one thread) while it
    has calls, never both: so its calls run one at a time, in order. The
    queue and the lock are C's: the loop's thread runs ``put``, and no
    Python-level condition wakes the threads.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        # Reentrant: a store dropped unclosed while its lock is held here
        # (its last call let go, a collection of cycles) stops these calls.
        self.lock = threading.RLock()
        self.keys: queue.SimpleQueue[Hashable] = queue.SimpleQueue()  # _END: the end
        # A key's calls not yet taken, in order; a key is here while one runs.
        self.waiting: dict[Hashable, collections.deque[_Job]] = {}
        self.stopped = False

    def put(self, key: Hashable, job: _Job) -> None:
        """Queue ``job`` behind the calls of ``key`` (the lock held)."""
        calls = self.waiting.get(key)
        if calls is None:  # none queued nor running: ready at once
            self.waiting[key] = collections.deque((job,))
            self.keys.put(key)
        else:
            calls.append(job)

    def stop(self) -> None:
        """No call after; the threads end once the calls queued have run."""
        with self.lock:
            if not self.stopped:
                self.stopped = True
                if not self.waiting:
                    self._end()

    def _end(self) -> None:
        for _ in range(self.threads):  # put once, when nothing is left to run
            self.keys.put(_END)

    def take(self) -> tuple[Hashable, _Job] | None:
        """The next call of the next key ready; None at the end."""
        key = self.keys.get()
        if key is _END:
            return None
        with self.lock:
            return key, self.waiting[key].popleft()  # let go by the thread, not here

    def done(self, key: Hashable) -> None:
        """The call of ``key`` taken has run: its next one is ready, if any."""
        with self.lock:
            if self.waiting[key]:
                self.keys.put(key)  # behind the keys already ready: each has its turn
                return
            del self.waiting[key]
            if self.stopped and not self.waiting:
                self._end()


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
        self._calls = _Calls(count)
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
            self._calls, self._threads, self._pid = _Calls(self._count), [], os.getpid()
            self._calls.stopped = stopped
            self._starting = threading.Lock()
        return self._calls

    def call(self, fn: Callable[[], _T], key: Hashable = None) -> asyncio.Future[_T]:
        """Run ``fn()`` in a worker: when keyed, after the calls of ``key``
        made before (None a key as any other: the calls of no session, in
        order, as they ran in one thread before keys moved between threads)."""
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
            calls.put(key if self._keyed else object(), (fn, future))
        return future

    def stop(self, *, wait: bool = True) -> None:
        """Let the calls queued finish, then end the threads (joined, with
        ``wait``); a call made after raises `WorkersStopped`."""
        self._current().stop()
        if wait:
            with self._starting:
                threads = list(self._threads)
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
