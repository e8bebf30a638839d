"""Side effects run through `EffectLog.once` by a worker killed (SIGKILL) at
random moments, then run again: each effect ran exactly once, or its key is
in doubt, and only where a kill fell between its intent and its outcome
(docs/effects.md)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import signal
import sys
from pathlib import Path

import pytest

from sessionstore import FileJournal, open_store
from sessionstore.effects import EffectState
from tests.kinds import StoreTargets

WORKER = Path(__file__).parent / "workers" / "effect_runner.py"
KILLS = 32
KEYS = 150


async def run(worker: asyncio.subprocess.Process, kill_within: float | None) -> list[str]:
    """One run of the worker's effects, killed at a random moment within
    ``kill_within`` seconds of its start (None: let it end). What it printed."""
    assert worker.stdin is not None
    assert worker.stdout is not None
    worker.stdin.write(b"run\n")
    await worker.stdin.drain()
    pid = int((await worker.stdout.readline()).removeprefix(b"pid "))
    assert await worker.stdout.readline() == b"ready\n"  # the journal is open
    printed = ["ready"]
    if kill_within is not None:
        await asyncio.sleep(random.uniform(0, kill_within))
        with contextlib.suppress(ProcessLookupError):  # ended before: not a kill
            os.kill(pid, signal.SIGKILL)
    while not (line := (await worker.stdout.readline()).decode()).startswith("exit"):
        assert line, "the worker ended"
        if line.strip():  # a line cut short by the kill is ended by the next
            printed.append(line.strip())
    if kill_within is None:
        assert printed[-1] == "end"
    return printed


@pytest.mark.parametrize("kind", ["file", "sqlite", "postgresql"])
async def test_killed_effects_run_once_or_are_in_doubt_where_the_kill_fell(
    kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    where = str(tmp_path / "agent") if kind == "file" else store_targets.new(kind)
    counter = tmp_path / "counter"
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        "file" if kind == "file" else "store",
        where,
        str(counter),
        str(KEYS),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        cut = 0  # runs killed while they ran effects
        for _ in range(KILLS):
            cut += "end" not in await run(worker, 0.1)
        printed = await run(worker, None)
    finally:
        assert worker.stdin is not None
        worker.stdin.close()
        await worker.wait()

    if kind == "file":
        states = await FileJournal.in_dir(where).effects.read()
    else:
        async with open_store(where) as store:
            states = await store.journal("agent").effects.read()
    by_key: dict[str, EffectState] = {state.key: state for state in states}
    runs = collections.Counter(counter.read_text().split()) if counter.exists() else {}
    assert sorted(by_key) == sorted(f"k{n}" for n in range(KEYS))  # every key started
    in_doubt = [key for key, state in by_key.items() if state.state == "in doubt"]
    for key, state in by_key.items():
        assert runs.get(key, 0) <= 1, f"{key} ran {runs[key]} times"
        if state.state == "done":
            assert runs.get(key, 0) == 1, f"{key} done, ran {runs.get(key, 0)} times"
        else:
            assert state.state == "in doubt", state
    # A kill leaves at most one effect between its intent and its outcome;
    # the last run, not killed, reports each of them and leaves no other.
    assert cut >= KILLS // 2, f"only {cut} kills fell among the effects"
    assert len(in_doubt) <= cut
    assert sorted(line.split()[1] for line in printed if line.startswith("doubt")) == sorted(
        in_doubt
    )
