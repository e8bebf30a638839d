"""Helpers shared by the tests: worker processes for concurrency and crash
tests, a trace of the SQL store's statements, and alembic's command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from sessionstore import SqlStore

ROOT = Path(__file__).resolve().parents[1]
WORKERS = Path(__file__).parent / "workers"
APPENDER = WORKERS / "appender.py"


class ForkedRun:
    """One run of a worker under a `ForkServer`: a child process, its pid,
    and what it prints, read as from a process's stdout."""

    def __init__(self, pid: int, stdout: asyncio.StreamReader) -> None:
        self.pid = pid
        self._stdout = stdout
        self.returncode: int | None = None
        """As `subprocess` gives it (-9 for SIGKILL), once read."""

    async def readline(self) -> bytes:
        """The child's next line; b"" once it is gone (its ``exit`` read)."""
        while self.returncode is None:
            line = await self._stdout.readline()
            assert line, "the fork server ended"
            if line.startswith(b"exit "):
                self.returncode = int(line.split()[1])
            elif line != b"\n":  # the server's own, ending a line a kill cut short
                return line
        return b""

    async def read(self) -> bytes:
        """Every line the child prints from here on, up to its end."""
        lines = []
        while line := await self.readline():
            lines.append(line)
        return b"".join(lines)

    def kill(self) -> None:
        """SIGKILL the child; nothing when it is gone already."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    async def wait(self) -> int:
        """Its exit code, once it is gone (what it still prints is dropped)."""
        await self.read()
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """Runs of one worker script, each a child forked from one process that
    imported the script once (tests/workers/forking.py): a kill test kills
    many runs, and a fork costs far less than a new interpreter. One run at
    a time; use as ``async with ForkServer(script) as server``. ``preload``:
    arguments for the script's import, before the forks (see forking.py)."""

    def __init__(self, script: Path, *preload: str) -> None:
        self.script = script
        self.preload = preload
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> ForkServer:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKERS / "forking.py"),
            str(self.script),
            *self.preload,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._process is not None
        assert self._process.stdin is not None
        self._process.stdin.close()
        await self._process.wait()

    async def run(self, *args: str) -> ForkedRun:
        """Start a run of the script with ``args``, as ``python SCRIPT ARGS...``."""
        process = self._process
        assert process is not None
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(json.dumps(args).encode() + b"\n")
        await process.stdin.drain()
        first = await process.stdout.readline()
        assert first.startswith(b"pid "), first
        return ForkedRun(int(first.split()[1]), process.stdout)


async def killed_run(
    server: ForkServer, args: list[str], kill_within: float | None, *, after: str = "ready"
) -> list[str]:
    """One run of a worker that prints ``ready`` first (tests/workers/
    effect_runner.py, framework_turn.py), killed with SIGKILL at a random
    moment within ``kill_within`` seconds of its first line starting with
    ``after`` (its ``ready``, by default; not killed when it ends first;
    None: let it end). The lines it printed from ``ready`` on."""
    run = await server.run(*args)
    assert await run.readline() == b"ready\n"
    printed = ["ready"]
    while after != "ready" and kill_within is not None:
        line = (await run.readline()).decode()
        if not line:
            return printed
        printed.append(line.strip())
        if line.startswith(after):
            break
    if kill_within is not None:
        await asyncio.sleep(random.uniform(0, kill_within))
        run.kill()  # nothing when it ended before: not a kill
    printed += (await run.read()).decode().split("\n")
    return [line.strip() for line in printed if line.strip()]


async def killed_at_step(server: ForkServer, args: list[str], kill_after: int) -> bool:
    """One run of a worker that prints ``ready``, then a line per step and
    ``ok`` at its end (tests/workers/retirer.py, expirer.py), killed with
    SIGKILL once it reported ``kill_after`` steps. Whether it was killed
    (rather than finishing first)."""
    worker = await server.run(*args)
    assert await worker.readline() == b"ready\n"
    steps = 0
    while steps < kill_after:
        line = await worker.readline()
        if not line or line.startswith(b"ok"):
            break
        steps += 1
    worker.kill()  # nothing when it ended before
    return await worker.wait() == -signal.SIGKILL


async def spawn_appender(
    target: str, session_id: str, worker: str, count: int, padding: int = 0
) -> asyncio.subprocess.Process:
    """Start a process appending ``count`` entries to one session."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(APPENDER),
        target,
        session_id,
        worker,
        str(count),
        str(padding),
        stdout=asyncio.subprocess.PIPE,
    )


async def run_appenders(target: str, session_id: str, workers: list[str], count: int) -> None:
    """Run appender processes side by side; each must succeed."""
    processes = [await spawn_appender(target, session_id, w, count, 2000) for w in workers]
    results = await asyncio.gather(*(p.communicate() for p in processes))
    assert [p.returncode for p in processes] == [0] * len(workers)
    for stdout, _ in results:
        assert stdout.split() == [str(n).encode() for n in range(count)]


def traced(store: SqlStore, threads: list[str] | None = None) -> list[str]:
    """The statements a SQLite store runs from now on, as SQLite ran them
    (values in place); ``threads`` gets the name of the thread running each."""
    statements: list[str] = []

    def record(sql: str) -> None:
        statements.append(sql)
        if threads is not None:
            threads.append(threading.current_thread().name)

    def trace(driver: sqlite3.Connection) -> None:
        driver.set_trace_callback(record)

    # The store runs its statements on the driver: trace its connections.
    runner = store.database.runner
    assert runner.sync_engine.dialect.name == "sqlite", "statements are traced on SQLite"
    event.listen(runner.sync_engine, "connect", lambda driver, _: trace(driver))
    for conn in runner.connections():
        driver = conn.connection.driver_connection
        assert isinstance(driver, sqlite3.Connection)
        trace(driver)
    return statements


def alembic(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run alembic's command line from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def open_files() -> list[str]:
    """The paths of the files this process holds open now (/proc/self/fd)."""
    return [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir() if fd.is_symlink()]


async def until_a_lock_waits_on(path: Path) -> None:
    """Return once the kernel lists a lock waiting on ``path``'s file (``->``
    in /proc/locks), or after about 30 s: a guard, the test then fails."""
    inode = f":{path.stat().st_ino} "
    for _ in range(3000):
        await asyncio.sleep(0.01)
        locks = Path("/proc/locks").read_text().splitlines()
        if any("->" in line and inode in line for line in locks):
            return


async def until_closed(path: Path) -> bool:
    """Whether the process lets go of ``path`` within about 30 s (a guard
    against a hang: it should once the held call ends)."""
    for _ in range(3000):
        if str(path) not in open_files():
            return True
        await asyncio.sleep(0.01)
    return False


class Hold:
    """Holds the calls of ``fn`` that ``which`` picks in their thread, once
    ``started``, until ``go``."""

    def __init__(self, fn: Callable[..., Any], which: Callable[..., bool]) -> None:
        self.fn, self.which = fn, which
        self.started, self.go = threading.Event(), threading.Event()

    def __call__(self, *args: Any) -> Any:
        if self.which(*args):
            self.started.set()
            self.go.wait()
        return self.fn(*args)

    async def until_started(self) -> None:
        for _ in range(3000):
            if self.started.is_set():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the call was never made")


def naming(path: Path) -> Callable[..., bool]:
    """Whether a call's descriptor (its first argument) is ``path``'s file."""

    def which(fd: int, *_: Any) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            return False

    return which


async def cancel_while_held(call: asyncio.Future[Any], hold: Hold, path: Path, other: Path) -> None:
    """Cancel ``call`` while ``hold`` holds the call it made on ``path``'s
    file in its thread, and check the file is let go only after that call
    ran: still open once the cancellation is seen, closed after, and a file
    opened meanwhile (``other``, which would take a closed one's number)
    untouched by the late call."""
    try:
        await hold.until_started()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # The held call goes on in its thread: its file is not closed beside it.
        assert str(path) in open_files()
        fd = os.open(other, os.O_RDWR)
    finally:
        hold.go.set()
    try:
        assert await until_closed(path)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # the late call used its own file
    finally:
        os.close(fd)
