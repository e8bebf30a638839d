"""`Holding`: the blocking calls one task makes on what it holds (a
descriptor, a lock, a temporary file), one at a time, and its letting go
after the last of them.

A call cancelled once it reached a thread still runs there (nothing stops
a ``write`` under way); one cancelled while queued may run later (a store's
`Workers` run every call) or not at all (``asyncio.to_thread``'s pool drops
it). Let go beside it, a descriptor's number could be another file's by the
time the call writes, reads or cuts it, and a cut could come before the
write it should undo. So the letting go waits for the call: the thread runs
it once the call ends, or in its place when the call had not started (a
cancelled call has no one waiting for it); a call that ended unstarted
(its pool dropped it, or its threads had stopped) lets go on the loop,
nothing running.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

__all__ = ["Holding"]

_T = TypeVar("_T")

Run = Callable[[Callable[[], Any]], Awaitable[Any]]

# The state of the last call made.
_ENDED = "ended"  # none made, or it returned (or raised) in its thread
_QUEUED = "queued"  # made, not yet started
_RUNNING = "running"  # started in its thread
_DROPPED = "dropped"  # ended unstarted (dropped, refused): never to run


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _nothing() -> None:
    """The call made to let go in a thread when no call is left to follow."""


class Holding:
    """The calls of one task on what it holds, through ``run`` (blocking
    work off the loop), awaited one at a time; `end`, `let_go` or `close` after."""

    def __init__(self, run: Run) -> None:
        self._run = run
        # Held for a few assignments, never across a call: the loop's thread
        # and the call's take it.
        self._lock = threading.Lock()
        self._state = _ENDED
        self._release: Callable[[], object] | None = None  # to run once the call ends
        self._opened: list[int] = []  # what `open` opened, noted in the opening's thread

    async def call(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` in a thread. Cancelled, it goes on there (or is dropped
        before it starts), and what `end` or `let_go` lets go follows it:
        what ``fn`` opens it notes where its letting go finds it, in its thread."""
        with self._lock:
            self._state = _QUEUED
        result: _T = await self._step(partial(self._guarded, fn))
        return result

    async def open(self, fn: Callable[[], _T]) -> _T:
        """`call` of ``fn``, which opens a descriptor (or gives None): noted
        in its thread, so that `close` closes it even when cancelled."""

        def opening() -> _T:
            fd = fn()
            if isinstance(fd, int):
                self._opened.append(fd)
            return fd

        return await self.call(opening)

    def close(self) -> None:
        """`let_go` of what `open` opened: closed after the last call."""
        self.let_go(partial(_close_all, self._opened))

    async def _step(self, guarded: Callable[[], Any]) -> Any:
        try:
            step = asyncio.ensure_future(self._run(guarded))
        except BaseException:  # refused at once: nothing runs, nor will
            self._settled(None)
            raise
        step.add_done_callback(self._settled)
        return await asyncio.shield(step)  # cancelled: the call goes on

    def _guarded(self, fn: Callable[[], _T]) -> _T | None:
        """``fn()``, then a letting go asked for meanwhile (in its place,
        asked for before it started); nothing once dropped."""
        with self._lock:
            if self._state == _DROPPED:
                return None  # let go on the loop already
            release, self._release = self._release, None
            self._state = _RUNNING if release is None else _ENDED
        if release is not None:
            release()  # its caller has gone: ``fn`` not run
            return None
        try:
            return fn()
        finally:
            with self._lock:
                self._state = _ENDED
                release, self._release = self._release, None
            if release is not None:
                release()

    def _settled(self, step: asyncio.Future[Any] | None) -> None:
        """On the loop, a call's end: one that never started lets go here
        (dropped by its pool, cancelled, or refused: its threads stopped)."""
        with self._lock:
            if self._state != _QUEUED:
                return  # it runs in its thread, or ran
            self._state = _DROPPED
            release, self._release = self._release, None
        if release is not None:
            release()

    async def end(self, release: Callable[[], object]) -> None:
        """``release()`` after the last call: run in a thread and awaited when
        that call ended; else (it was cancelled) by that call's thread once
        it ends, not waited for. Cancelled, it goes on as a call does."""
        with self._lock:
            if self._state in (_QUEUED, _RUNNING):
                self._release = release
                return
            dropped = self._state == _DROPPED  # the loop closes: no thread to run it
            if not dropped:
                self._state, self._release = _QUEUED, release
        if dropped:
            release()
        else:
            await self._step(partial(self._guarded, _nothing))

    def let_go(self, release: Callable[[], object]) -> None:
        """``release()`` (a close: no wait for I/O) here and now when the last
        call ended; else by that call's thread once it ends. Never waits, so
        an async generator's ``finally`` can call it."""
        with self._lock:
            if self._state in (_QUEUED, _RUNNING):
                self._release = release
                return
        release()
