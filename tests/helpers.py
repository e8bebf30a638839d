"""Helpers shared by the tests: worker processes for concurrency and crash tests."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

WORKERS = Path(__file__).parent / "workers"
APPENDER = WORKERS / "appender.py"


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
