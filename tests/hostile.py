"""Helpers for tests of hostile file trees: FIFOs, links, a full disk.

A test of a FIFO must fail, not hang, when the code under test blocks on
it: `bounded` gives up after a few seconds and opens the FIFO's other end,
so the blocked thread goes on and the test run ends. A test of a link to
``/dev/zero`` runs in a process whose memory is capped (`run_capped`), so
code that reads it whole fails with a `MemoryError` instead of eating the
machine. A full disk is a small tmpfs (`small_disk`, as root) or a write
that takes half and then fails with ``ENOSPC`` (`disk_fills_on`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

_T = TypeVar("_T")

WAIT = 10.0  # seconds: far more than any call here takes when it does not block


def make_fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def release(fifo: Path) -> None:
    """Open a FIFO's ends without blocking, so a thread blocked opening it goes on."""
    for flags in (os.O_WRONLY, os.O_RDONLY):
        try:
            fd = os.open(fifo, flags | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)


async def bounded(call: Awaitable[_T], *fifos: Path, seconds: float = WAIT) -> _T:
    """Await ``call``; fail the test when it takes more than ``seconds``, once
    the FIFOs it may be blocked on are opened at their other end (so that no
    thread stays blocked after the test)."""
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if done:
        return await task
    for _ in range(300):
        for fifo in fifos:
            release(fifo)
        done, _ = await asyncio.wait({task}, timeout=0.1)
        if done:
            break
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: what it raised once released is beside the point
    pytest.fail(f"blocked for {seconds} s on a FIFO: {', '.join(map(str, fifos))}")


def run_capped(code: str, *args: str, memory: int = 1 << 30, seconds: float = 60) -> str:
    """Run ``code`` in a Python process of at most ``memory`` bytes; its output
    (stdout then stderr). Reading ``/dev/zero`` whole fails there quickly."""
    prelude = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=seconds,
        check=False,
    )
    return done.stdout + done.stderr


def disk_fills_on(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> Callable[[], None]:
    """Make writes to ``paths`` (or to files in them, for a directory) act as
    on a disk that fills: a write takes half its bytes, the next fails with
    ``ENOSPC``, and so on. Returns what frees the disk again."""
    real_write = os.write
    names = [str(p) for p in paths]
    state = {"full": True, "took_half": False}

    def write(fd: int, data: bytes) -> int:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if state["full"] and any(target == n or target.startswith(n + "/") for n in names):
            if not state["took_half"] and len(data) > 1:
                state["took_half"] = True
                return real_write(fd, bytes(data[: len(data) // 2]))
            state["took_half"] = False
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)

    def free() -> None:
        state["full"] = False

    return free


@contextlib.contextmanager
def mounted_tmpfs(where: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted at a new directory in ``where`` for the block
    (root only; the test is skipped elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = where / f"disk-{uuid.uuid4().hex[:8]}"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` with a file until about ``leave`` bytes are free; the file."""
    filler = disk / "filler"
    with filler.open("wb") as file:
        block = b"\0" * 4096
        while True:
            stats = os.statvfs(disk)
            if stats.f_bavail * stats.f_frsize <= leave:
                break
            try:
                file.write(block)
                file.flush()
            except OSError:
                break
    return filler
