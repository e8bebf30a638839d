"""Helpers shared by the tests: worker processes for concurrency and crash
tests, and a trace of the SQL store's statements."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
import sys
import threading
from pathlib import Path

from sqlalchemy import event

from sessionstore import SqlStore

WORKERS = Path(__file__).parent / "workers"
APPENDER = WORKERS / "appender.py"


async def forked_run(
    worker: asyncio.subprocess.Process, kill_within: float | None, *, after: str = "ready"
) -> list[str]:
    """One run of a forking worker (tests/workers/effect_runner.py,
    framework_turn.py), killed with SIGKILL at a random moment within
    ``kill_within`` seconds of its first line starting with ``after`` (its
    ``ready``, by default; not killed when it ends first; None: let it
    end). The lines it printed from ``ready`` on."""
    assert worker.stdin is not None
    assert worker.stdout is not None
    worker.stdin.write(b"run\n")
    await worker.stdin.drain()
    pid = int((await worker.stdout.readline()).removeprefix(b"pid "))
    assert await worker.stdout.readline() == b"ready\n"
    printed = ["ready"]
    while after != "ready" and kill_within is not None:
        line = (await worker.stdout.readline()).decode()
        if line.startswith("exit"):
            return printed
        printed.append(line.strip())
        if line.startswith(after):
            break
    if kill_within is not None:
        await asyncio.sleep(random.uniform(0, kill_within))
        with contextlib.suppress(ProcessLookupError):  # ended before: not a kill
            os.kill(pid, signal.SIGKILL)
    while not (line := (await worker.stdout.readline()).decode()).startswith("exit"):
        assert line, "the worker ended"
        if line.strip():  # a line cut short by the kill is ended by the next
            printed.append(line.strip())
    return printed


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
