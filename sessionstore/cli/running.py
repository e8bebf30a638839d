"""Running a command: errors as one line, Ctrl-C at once (130), a closed pipe quietly
(141). Imported once the arguments are parsed: ``--help`` loads no asyncio nor rich."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from rich.text import Text

from sessionstore.cli.output import Command, Refused, err_console, escaped, warn
from sessionstore.cli.wording import in_user_words
from sessionstore.errors import SessionStoreError

__all__ = ["BROKEN_PIPE", "INTERRUPTED", "run"]

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a writer whose reader left


class _DaemonThreads(concurrent.futures.ThreadPoolExecutor):
    """The event loop's executor, of daemon threads: a Ctrl-C must not wait for a
    blocking call in flight (asyncio's own executor is joined when the loop closes
    and at exit). Every call they run is awaited before a command succeeds."""

    def __init__(self, threads: int = 4) -> None:
        super().__init__(max_workers=threads)
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._started = 0
        self._size = threads
        self._start_lock = threading.Lock()

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._calls.put(call)
        with self._start_lock:
            if self._started < self._size:
                self._started += 1
                threading.Thread(target=self._work, name="sessionstore-io", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            self._calls.get()()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: see the class."""


async def _guarded(run: Command, args: argparse.Namespace) -> int:
    asyncio.get_running_loop().set_default_executor(_DaemonThreads())
    try:
        return await run(args)
    except KeyboardInterrupt:  # raised in the command's own code: end it here
        return INTERRUPTED


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt wherever the command is (a blocked write), not
    only once the event loop runs again; a second one, in the clean-up, ends the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = 0

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal pressed
        pressed += 1
        if pressed > 1:  # die of the signal, as Unix tools do (the shell says 130)
            os.write(2, b"sessionstore: interrupted\n")
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _silence_stdout() -> None:
    """Drop what is left to write to stdout: a final flush must neither fail nor wait."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a test's capture): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class _Warnings(logging.Handler):
    """The library's logged warnings as ``warning: ...`` lines, in the user's words."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(logging.WARNING)
        self._args = args

    def emit(self, record: logging.LogRecord) -> None:
        warn(in_user_words(record.getMessage(), self._args))


def _one_line(error: BaseException, args: argparse.Namespace) -> str:
    """An error's message on one line, in the user's words, safe to print."""
    text = "; ".join(part.strip() for part in str(error).splitlines() if part.strip())
    return escaped(in_user_words(text, args))


def run(args: argparse.Namespace) -> int:
    """Run the command ``args`` were parsed for; return the exit status."""
    command: Command = args.run
    library = logging.getLogger("sessionstore")
    handler = _Warnings(args)
    library.addHandler(handler)
    try:
        with _interruptible():
            status = asyncio.run(_guarded(command, args))
        if status == INTERRUPTED:
            raise KeyboardInterrupt
        return status
    except KeyboardInterrupt:
        _silence_stdout()
        err_console.print("sessionstore: interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()  # like any Unix tool whose reader left (`| head`): quietly
        return BROKEN_PIPE
    except (Refused, SessionStoreError, OSError) as exc:
        err_console.print(Text(f"sessionstore: error: {_one_line(exc, args)}"))
    finally:
        library.removeHandler(handler)
    return 1
