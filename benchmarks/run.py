"""Benchmarks: sessionstore against raw sqlite3, as ratios measured in one run.

Run on demand (not in CI):

    .venv/bin/python benchmarks/run.py            # full sizes
    .venv/bin/python benchmarks/run.py --quick    # a smoke run

Every figure is the median of several repeats, printed beside a baseline
doing the same work with the standard library's sqlite3 on the same pragmas
(WAL, synchronous=NORMAL), measured in the same run, and the ratio between
them: machines are noisy, ratios much less so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from sessionstore import (
    CompactionEntry,
    Message,
    MessageEntry,
    SessionMeta,
    SqlStore,
    encode,
    export_archive,
)

TEXT = "A realistic message of a few dozen words, as agents write them. " * 4
RAW_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries "
    "(session INTEGER, seq INTEGER, line TEXT, PRIMARY KEY (session, seq))"
)


def entry(n: int) -> MessageEntry:
    message = Message.user(f"{TEXT}{n}")
    return MessageEntry(id=f"e{n}", timestamp="2026-11-30T00:00:00+00:00", message=message)


def raw_appends(path: Path, lines: list[str]) -> float:
    """Seconds per durable append with raw sqlite3: one transaction each."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute(RAW_SCHEMA)
    start = time.perf_counter()
    for seq, line in enumerate(lines, 1):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO entries VALUES (1, ?, ?)", (seq, line))
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed / len(lines)


async def store_appends(path: Path, tasks: int, each: int) -> float:
    """Seconds per append with ``tasks`` tasks appending ``each`` entries at once."""
    store = await SqlStore.open(str(path))
    await store.create(SessionMeta(id="s"))

    async def writer(task: int) -> None:
        for n in range(each):
            await store.append("s", entry(task * each + n))

    start = time.perf_counter()
    await asyncio.gather(*(writer(task) for task in range(tasks)))
    elapsed = time.perf_counter() - start
    await store.close()
    return elapsed / (tasks * each)


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


async def atimed(call: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


class Bench:
    """Collects rows of (work, ours, baseline) medians."""

    def __init__(self, work: Path, repeats: int) -> None:
        self.work = work
        self.repeats = repeats
        self.rows: list[tuple[str, float, float]] = []
        self.files = 0

    def fresh(self) -> Path:
        self.files += 1
        return self.work / f"{self.files}.db"

    def record(self, name: str, ours: list[float], base: list[float]) -> None:
        self.rows.append((name, statistics.median(ours), statistics.median(base)))

    async def appends(self, tasks: int, each: int) -> None:
        lines = [encode(entry(n)) for n in range(tasks * each)]
        ours = [await store_appends(self.fresh(), tasks, each) for _ in range(self.repeats)]
        base = [raw_appends(self.fresh(), lines) for _ in range(self.repeats)]
        what = "one writer" if tasks == 1 else f"{tasks} tasks at once"
        self.record(f"append, {what} (per append)", ours, base)

    async def reads(self, count: int, sessions: int) -> None:
        path = self.fresh()
        store = await SqlStore.open(str(path))
        await store.create(SessionMeta(id="big"))
        for start in range(0, count, 1000):
            batch = [entry(n) for n in range(start, min(count, start + 1000))]
            await store.append_many("big", batch)
        cut = f"e{count - 50}"
        marker = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id=cut)
        await store.append("big", marker)
        for n in range(sessions):
            await store.create(SessionMeta(id=f"s{n}"))
        raw = sqlite3.connect(path)

        def raw_load() -> object:
            query = "SELECT line FROM entries WHERE session_pk = 1 ORDER BY seq"
            return [json.loads(row[0]) for row in raw.execute(query)]

        def raw_tail() -> object:
            query = "SELECT line FROM entries WHERE session_pk = 1 AND seq > ? ORDER BY seq"
            return raw.execute(query, (count - 50,)).fetchall()

        def raw_list() -> object:
            return raw.execute("SELECT header FROM sessions ORDER BY pk").fetchall()

        runs: dict[str, tuple[list[float], list[float]]] = {}
        for _ in range(self.repeats):
            for name, ours, base in (
                (f"load {count:,} entries into models", lambda: store.load("big"), raw_load),
                (
                    f"load_context, 50 kept of {count:,}",
                    lambda: store.load_context("big"),
                    raw_tail,
                ),
                (f"list {sessions:,} sessions", store.list, raw_list),
            ):
                mine, theirs = runs.setdefault(name, ([], []))
                mine.append(await atimed(ours))
                theirs.append(timed(base))
        for name, (mine, theirs) in runs.items():
            self.record(name, mine, theirs)
        await self.export(store)
        await store.close()

    async def export(self, store: SqlStore) -> None:
        ours, copies = [], []
        for n in range(self.repeats):
            target = self.work / f"archive-{n}"
            ours.append(await atimed(lambda: export_archive(store, target, sessions=["big"])))  # noqa: B023
            exported = target / "sessions" / "big.jsonl"
            copies.append(timed(lambda: shutil.copyfile(exported, self.work / "copy")))  # noqa: B023
        size = exported.stat().st_size
        self.record(
            f"export {size / 1e6:.0f} MB ({size / 1e6 / statistics.median(ours):.0f} MB/s)",
            ours,
            copies,
        )

    def report(self) -> None:
        print(f"{'work':48} {'sessionstore':>14} {'baseline':>14} {'ratio':>8}")
        for name, ours, base in self.rows:
            print(f"{name:48} {ours * 1e6:11.1f} µs {base * 1e6:11.1f} µs {ours / base:7.1f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sessionstore-bench-"))
    bench = Bench(work, 3 if args.quick else 5)
    try:
        await bench.appends(1, 200 if args.quick else 2000)
        await bench.appends(50, 4 if args.quick else 40)
        await bench.reads(5_000 if args.quick else 100_000, 1_000 if args.quick else 10_000)
    finally:
        shutil.rmtree(work)
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} cpus"
    )
    print("baselines: raw sqlite3 appends (one transaction each), SELECT + json.loads,")
    print("an indexed tail SELECT, one SELECT of headers, a plain file copy")
    bench.report()


if __name__ == "__main__":
    asyncio.run(main())
