"""What each cache of the JSONL store buys: the operation it speeds up, timed
with it and without it, in one sitting.

* the context hints (``.kept/``): the first `load_context` of a new store
  object, a hint left by an earlier one or none (as after a new compaction).
* the cached contexts (per store object): `load_context` asked again,
  against `drop_caches` before each call.
* the listing orders (``.listings/``): a later page of `summaries`, read
  from the kept order or, with ``write_caches=False``, on a scan made then.
* the journals' key indexes (per store object): `keyed` on a journal of
  keyed lines, against `drop_caches` before each call.

Run: ``PYTHONPATH=. python benchmarks/caches.py [--quick]``; it prints one
row per figure (median of the rounds; the ratio is without / with). The
index of ids that earlier versions kept in ``.ids/`` was timed here too
(docs/jsonl.md, "No index of ids") and removed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from messages import batches, entry

from sessionstore import CompactionEntry, JsonlStore, SessionMeta, encode
from sessionstore.backends.jsonl import HINTS

KEPT = 50  # messages the compaction keeps


async def timed(call: Callable[[], Awaitable[object]], before: Callable[[], object]) -> float:
    before()
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def median(
    call: Callable[[], Awaitable[object]], rounds: int, before: Callable[[], object] = lambda: None
) -> float:
    return statistics.median([await timed(call, before) for _ in range(rounds)])


def row(what: str, without: float, with_: float) -> None:
    print(
        f"| {what} | {without * 1e6:,.1f} µs | {with_ * 1e6:,.1f} µs | {without / with_:.2f}x |",
        flush=True,
    )


async def history(where: Path, count: int) -> None:
    """Session ``s``: ``count`` messages, then a compaction keeping the last `KEPT`."""
    async with JsonlStore(where) as store:
        await store.create(SessionMeta(id="s"))
        for batch in batches(count):
            await store.append_many("s", batch)
        cut = f"e{count - KEPT}"
        compaction = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id=cut)
        await store.append("s", compaction)


async def contexts(work: Path, counts: list[int], rounds: int) -> None:
    print("\n| load_context of a session of N entries | without | with | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for count in counts:
        where = work / f"history-{count}"
        await history(where, count)
        first: list[float] = []
        hinted: list[float] = []
        again_cached: list[float] = []
        again_dropped: list[float] = []
        for _ in range(rounds):
            store = JsonlStore(where)
            shutil.rmtree(where / HINTS, ignore_errors=True)
            first.append(await timed(lambda: store.load_context("s"), lambda: None))  # noqa: B023
            store = JsonlStore(where)  # a new object: the hint the last one left
            hinted.append(await timed(lambda: store.load_context("s"), lambda: None))  # noqa: B023
            again_cached.append(await median(lambda: store.load_context("s"), 20))  # noqa: B023
            dropped = await median(lambda: store.load_context("s"), 20, store.drop_caches)  # noqa: B023
            again_dropped.append(dropped)
        m = statistics.median
        row(f"{count:,}: first call of a new object, hint", m(first), m(hinted))
        row(f"{count:,}: asked again, cached context", m(again_dropped), m(again_cached))
        shutil.rmtree(where)


def sessions(where: Path, count: int, messages: int) -> None:
    """``count`` session files of ``messages`` messages each, written as the
    store writes them, each a second apart in time (last activity)."""
    where.mkdir()
    body = "".join(encode(entry(n)) + "\n" for n in range(messages))
    now = time.time()
    for n in range(count):
        session_id = f"s{n:06d}"
        meta = SessionMeta(id=session_id, created_at=f"2026-11-{1 + n % 28:02d}T00:00:00+00:00")
        path = where / f"{session_id}.jsonl"
        path.write_text(encode(meta) + "\n" + body)
        os.utime(path, ns=(int((now - count + n) * 1e9),) * 2)


async def listings(work: Path, counts: list[int], rounds: int) -> None:
    print("\n| a later page of summaries(limit=50) among N sessions | without | with | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for count in counts:
        where = work / f"listing-{count}"
        sessions(where, count, 10)
        for order in ("last_activity", "created"):
            later: dict[bool, list[float]] = {True: [], False: []}
            firsts: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(rounds):
                for caches in (True, False):
                    store = JsonlStore(where, write_caches=caches)
                    start = time.perf_counter()
                    page = await store.summaries(order=order)
                    firsts[caches].append(time.perf_counter() - start)
                    cursor = page[-1].cursor
                    start = time.perf_counter()
                    await store.summaries(order=order, after=cursor)
                    later[caches].append(time.perf_counter() - start)
            m = statistics.median
            row(f"{count:,}, by {order}: a later page, kept order", m(later[False]), m(later[True]))
            what = f"{count:,}, by {order}: the first page, cost of keeping it"
            row(what, m(firsts[False]), m(firsts[True]))
        shutil.rmtree(where)


async def journals(work: Path, counts: list[int], rounds: int) -> None:
    print("\n| keyed(one key) on a journal of N keyed lines | without | with | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for count in counts:
        store = JsonlStore(work / f"journal-{count}")
        journal = store.journal("agent", durability="store")
        lines = [
            f'{{"key":"effect/{n:06d}","state":"done","result":"{"x" * 200}"}}'.encode()
            for n in range(count)
        ]
        for start in range(0, count, 1000):
            await journal.append_raw(*lines[start : start + 1000])
        key = f"effect/{count // 2:06d}"
        await journal.keyed(key)
        kept = await median(lambda: journal.keyed(key), rounds * 20)  # noqa: B023
        dropped = await median(lambda: journal.keyed(key), rounds * 4, store.drop_caches)  # noqa: B023
        row(f"{count:,} lines: keyed, the key index", dropped, kept)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller stores, fewer rounds")
    parser.add_argument("--only", choices=["contexts", "listings", "journals"], action="append")
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    work = Path(tempfile.mkdtemp(prefix="sessionstore-caches-"))
    only = set(args.only or ["contexts", "listings", "journals"])
    try:
        if "contexts" in only:
            sizes = [1_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
            await contexts(work, sizes, rounds)
        if "listings" in only:
            await listings(work, [1_000, 10_000] if args.quick else [1_000, 100_000], rounds)
        if "journals" in only:
            await journals(work, [1_000, 100_000], rounds)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    asyncio.run(main())
