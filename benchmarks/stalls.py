"""The stalls part of the benchmark: how long the event loop is kept from
running while 50 tasks append to and read from one store.

An agent server runs many conversations on one event loop; a store call
that does its I/O (or a long piece of work) on the loop's thread keeps
every other conversation waiting. Here 50 tasks each append a message to
a session of their own and read its context back, turn after turn, while
a watcher asks to wake every millisecond and records how late it woke:
the loop's stall. Figures are the 99th percentile and the longest of
those delays over each round (40 turns of each task), medians of the
rounds.

What a stall is made of. One pass of the loop runs a step of every task
that is ready, so with 50 tasks a stall is 50 steps, and the watcher,
woken after the steps already waiting, may wait for two passes (the
memory store gives the loop a turn at each operation, and an append a
second one between its encoding and its write; it decodes only what was
appended since its cached context: about 15 us a step). The stores that
work in threads (SQLite, JSONL, PostgreSQL) do little on the loop; their
stall is mostly the loop's thread waiting for the GIL while the worker
threads run Python (their drivers, the file work), and on a shared
machine for a core: the no-store row is that machine's own floor. The
fewer threads compete and the less Python each runs, the shorter the
wait: the JSONL store runs two threads of its own, not to_thread's pool.

The baseline, in the same run, is the floor: the same watcher while 50
tasks do the same turns in pure Python (a message appended to a list and
its last 20 read back) with ``await asyncio.sleep(0)`` where the store
would wait, so the delays left are the loop's own and the machine's.
The target (issue of the lighter house) is a p99 of at most 2 ms on every
backend.

Runs SQLite, JSONL and memory; PostgreSQL too when ``SESSIONSTORE_PG_URL``
names a server.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from results import Table

from sessionstore import Message, MessageEntry, SessionMeta, SessionStore, open_store

TASKS = 50
WAKE = 0.001  # seconds between the watcher's wake-ups
TEXT = "a message of an agent's conversation, " * 6  # about 240 bytes


def _entry(task: int, turn: int) -> MessageEntry:
    return MessageEntry(
        id=f"e{task}-{turn}",
        timestamp="2026-01-01T00:00:00Z",
        message=Message(role="user", content=TEXT),
    )


async def _watched(work: object) -> list[float]:
    """The watcher's delays (seconds late) while ``work`` (an awaitable) runs."""
    delays: list[float] = []
    done = asyncio.Event()

    async def watch() -> None:
        while not done.is_set():
            asked = time.perf_counter()
            await asyncio.sleep(WAKE)
            delays.append(max(0.0, time.perf_counter() - asked - WAKE))

    watcher = asyncio.create_task(watch())
    try:
        await work  # type: ignore[misc]
    finally:
        done.set()
        await watcher
    return delays


async def _store_turns(store: SessionStore, turns: int, run: str) -> None:
    async def conversation(task: int) -> None:
        session = await store.create(SessionMeta(id=f"{run}-t{task}"))
        for turn in range(turns):
            await store.append(session, _entry(task, turn))
            await store.load_context(session)

    await asyncio.gather(*(conversation(task) for task in range(TASKS)))


async def _floor_turns(turns: int) -> None:
    async def conversation(task: int) -> None:
        kept: list[MessageEntry] = []
        for turn in range(turns):
            kept.append(_entry(task, turn))
            await asyncio.sleep(0)
            _ = kept[-20:]
            await asyncio.sleep(0)

    await asyncio.gather(*(conversation(task) for task in range(TASKS)))


FINEST = 1e-6  # a delay below a microsecond counts as one (a ratio needs no zero)


def _p99(delays: list[float]) -> float:
    if len(delays) < 2:
        return max(max(delays, default=0), FINEST)
    found = statistics.quantiles(delays, n=100, method="inclusive")[98]
    return max(found, FINEST)


def _longest(delays: list[float]) -> float:
    return max(max(delays, default=0), FINEST)


async def stalls(quick: bool, rounds: int) -> list[Table]:
    """The stalls table: each backend's p99 and longest stall against the floor's."""
    table = Table(
        "The event loop's stalls: 50 tasks appending and reading (target p99 <= 2 ms)",
        "sessionstore",
        "no store",
    )
    turns = 8 if quick else 40  # each task's turns in a round
    targets = {"memory": "memory://"}
    work = Path(tempfile.mkdtemp(prefix="sessionstore-stalls-"))
    targets["sqlite"] = str(work / "stalls.db")
    targets["jsonl"] = f"jsonl://{work / 'stalls'}"  # work is absolute
    if url := os.environ.get("SESSIONSTORE_PG_URL"):
        targets["postgresql"] = url
    floors = [await _watched(_floor_turns(turns)) for _ in range(rounds)]
    for kind, target in targets.items():
        seen: list[list[float]] = []
        async with open_store(target) as store:
            for _ in range(rounds):
                seen.append(await _watched(_store_turns(store, turns, uuid.uuid4().hex)))
        table.add(f"{kind}: stall p99", [_p99(d) for d in seen], [_p99(d) for d in floors])
        table.add(
            f"{kind}: longest stall",
            [_longest(d) for d in seen],
            [_longest(d) for d in floors],
        )
    return [table]
