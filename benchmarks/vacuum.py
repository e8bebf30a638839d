"""Vacuum: a SQLite store of about 1 GB, 90% of its sessions erased, given back.

Run on demand (not in CI):

    .venv/bin/python benchmarks/vacuum.py            # about 1 GB
    .venv/bin/python benchmarks/vacuum.py --quick    # about 40 MB, a smoke run

A store is filled through the store's own calls (sessions of messages of
about 4 kB, the texts of a few dozen words of agents' tool outputs), then
90% of its sessions, picked at random across the file, are erased with
``store.erase``. A writer in another process appends a message to a
session of its own every 5 ms, each append timed: first for a while with
nothing else running (the baseline), then throughout a `vacuum` run in
this process, in one run. Printed: the file's size (with its ``-wal``)
before the erasures, after them and after the vacuum; the vacuum's time,
steps and longest step; and the writer's appends, median, p99 and
longest, with and without the vacuum. With ``--convert``, the same store
made before incremental auto_vacuum (a copy, ``auto_vacuum=NONE``, erased
alike) is vacuumed too: its full VACUUM holds the writer off for its run.

The machine the figures come from is shared and noisy: compare the two
writers of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from sessionstore import Message, MessageEntry, SessionMeta, open_store, vacuum

WORDS = (
    *("the", "build", "failed", "on", "step", "three", "because", "cache", "was", "stale"),
    *("so", "I", "cleared", "it", "and", "ran", "tests", "again", "with", "verbose", "flag"),
    *("output", "shows", "a", "timeout", "in", "network", "client", "while", "fetching"),
    *("index", "retry", "backoff", "fixed"),
)
ENTRY_TEXT = 4000  # characters of each message
BATCH = 250  # entries a session is written in, per append_many
ERASED = 0.9
PACE = 0.005  # seconds between the writer's appends


def text(rng: random.Random) -> str:
    words: list[str] = []
    size = 0
    while size < ENTRY_TEXT:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def entry(session: int, n: int, body: str) -> MessageEntry:
    return MessageEntry(
        id=f"s{session}-{n}",
        timestamp="2026-12-01T00:00:00+00:00",
        message=Message.user(body),
    )


def file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())


def megabytes(count: int) -> str:
    return f"{count / 1e6:,.1f} MB"


async def build(db: Path, sessions: int, per_session: int) -> None:
    rng = random.Random(7)
    bodies = [text(rng) for _ in range(64)]
    started = time.perf_counter()
    async with open_store(db) as store:
        for s in range(sessions):
            await store.create(SessionMeta(id=f"s{s}"))
            for start in range(0, per_session, BATCH):
                batch = [
                    entry(s, n, bodies[(s + n) % len(bodies)])
                    for n in range(start, min(per_session, start + BATCH))
                ]
                await store.append_many(f"s{s}", batch)
            if s % max(1, sessions // 10) == 0:
                print(f"  filled {s}/{sessions} sessions, {megabytes(file_bytes(db))}", flush=True)
        await store.create(SessionMeta(id="writer"))
    print(f"  filled in {time.perf_counter() - started:.0f} s", flush=True)


async def erase(db: Path, doomed: list[int]) -> float:
    started = time.perf_counter()
    async with open_store(db) as store:
        for count, s in enumerate(doomed):
            await store.erase(f"s{s}", reason="retention: benchmark")
            if count % max(1, len(doomed) // 5) == 0:
                print(f"  erased {count}/{len(doomed)}", flush=True)
    return time.perf_counter() - started


def make_old(db: Path) -> None:
    """The file as one made before incremental auto_vacuum."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA auto_vacuum=NONE")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# ---------------------------------------------------------------- the writer


async def write_until(db: str) -> None:
    """The writer process: an append every `PACE` seconds until its stdin gives
    a line; then the appends' times, as JSON on stdout."""
    waits: list[float] = []
    body = Message.user("a message appended while the store is vacuumed " * 10)
    async with open_store(db) as store:
        n = len(await store.load("writer"))
        print("ready", flush=True)
        stop = asyncio.ensure_future(asyncio.to_thread(sys.stdin.readline))
        while not stop.done():
            one = MessageEntry(id=f"w{n}", timestamp="2026-12-01T00:00:00+00:00", message=body)
            started = time.perf_counter()
            await store.append("writer", one)
            waits.append(time.perf_counter() - started)
            n += 1
            await asyncio.sleep(PACE)
    print(json.dumps(waits), flush=True)


class Writer:
    """The writer process, started and stopped; its appends' times."""

    def __init__(self, db: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--writer", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != "ready\n":
            raise SystemExit("the writer process failed")

    def finish(self) -> list[float]:
        out, _ = self.process.communicate("stop\n")
        waits: list[float] = json.loads(out)
        return waits


def summary(waits: list[float]) -> str:
    ms = sorted(w * 1000 for w in waits)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (
        f"{len(ms):>6,} appends  median {statistics.median(ms):7.2f} ms  "
        f"p99 {p99:7.2f} ms  max {ms[-1]:8.2f} ms"
    )


async def vacuumed_with_writer(db: Path) -> None:
    writer = Writer(db)
    await asyncio.sleep(1.0)
    before = file_bytes(db)
    started = time.perf_counter()
    report = await vacuum(db)
    took = time.perf_counter() - started
    await asyncio.sleep(1.0)
    waits = writer.finish()
    converted = " (converted by a full VACUUM first)" if report.converted else ""
    print(f"  vacuum{converted}: {megabytes(before)} -> {megabytes(report.bytes_after)}")
    print(
        f"  took {took:.1f} s: {report.pages_freed:,} pages in {report.chunks:,} steps, "
        f"the longest step {report.longest_step * 1000:.0f} ms; complete: {report.complete}"
    )
    print(f"  writer during the vacuum:    {summary(waits)}")


async def main(quick: bool, convert: bool, keep: Path | None) -> None:
    sessions = 100 if quick else 1000
    per_session = 100 if quick else 250  # 40 MB or 1 GB of texts, about
    work = Path(tempfile.mkdtemp(prefix="vacuum-bench-", dir=keep))
    try:
        db = work / "store.db"
        print(f"filling {sessions:,} sessions of {per_session:,} messages of ~4 kB", flush=True)
        await build(db, sessions, per_session)
        full = file_bytes(db)
        doomed = random.Random(11).sample(range(sessions), int(sessions * ERASED))
        old = work / "old.db"
        if convert:
            shutil.copyfile(db, old)
            make_old(old)
        print(f"erasing {len(doomed):,} sessions ({ERASED:.0%})", flush=True)
        took = await erase(db, doomed)
        erased = file_bytes(db)
        print(f"  erased in {took:.0f} s")
        print(f"file: {megabytes(full)} full, {megabytes(erased)} after the erasures")

        baseline = Writer(db)
        await asyncio.sleep(5.0 if quick else 20.0)
        print(f"  writer with no vacuum:       {summary(baseline.finish())}")
        await vacuumed_with_writer(db)

        if convert:
            print("the same store, made before incremental auto_vacuum:", flush=True)
            await erase(old, doomed)
            print(f"  after the erasures: {megabytes(file_bytes(old))}")
            await vacuumed_with_writer(old)
    finally:
        if keep is None:
            shutil.rmtree(work)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="about 40 MB: a smoke run")
    parser.add_argument(
        "--convert", action="store_true", help="also an older file, converted by a full VACUUM"
    )
    parser.add_argument("--keep", type=Path, help="work in (and keep) a directory under this")
    parser.add_argument("--writer", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        asyncio.run(write_until(args.writer))
    else:
        asyncio.run(main(args.quick, args.convert, args.keep))
