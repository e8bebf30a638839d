"""Deep-fork campaign: a fork of a fork of a fork ..., 1,200 deep, on every
backend, through the operations that read a whole family.

Each trial builds a chain through the API: session ``s0`` with a message,
then ``s<n>`` a fork of ``s<n-1>`` adding one or two messages of its own
(the shape an agent retrying from its last turn leaves). Then, each timed
and bounded by ``--timeout`` seconds:

* ``summaries``: `summaries(limit=None)` in this process: every session,
  each with its whole history's count, none faulty;
* ``tree``: ``sessionstore ls --tree``: exit 0, every session drawn;
* ``verify``: ``sessionstore verify``: exit 0, ``ok``;
* ``export``: ``sessionstore export DIR``: exit 0, a file per session, the
  deepest holding its header and its whole history;
* ``retire``: ``sessionstore retire --to DIR --before 2100-01-01``: exit 0,
  the store left empty, a file per session in the archive.

A step past its timeout is ``hang``; a traceback ``crash``; a wrong answer
``lost``. The seconds each step took are printed as it ends and in the
report's notes (in milliseconds). PostgreSQL runs when ``--pg-url`` (or
``SESSIONSTORE_PG_URL``) names a server, in a schema of its own, dropped
at the end.

Usage: python scripts/adversarial/deep_forks.py [--depth 1200] [--trials 1]
    [--backends jsonl,sqlite,postgresql] [--timeout 600] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from common import PYTHON, Tally, Trial, attempt, cleanup, finish, pg_schema, run

from sessionstore import Message, MessageEntry, SessionMeta, SessionStore, open_store
from sessionstore.timestamps import now_rfc3339

BACKENDS = ("jsonl", "sqlite", "postgresql")


def meta(n: int) -> SessionMeta:
    return SessionMeta(id=f"s{n}", created_at=now_rfc3339())  # retire tells its age


def entry(n: int, part: int) -> MessageEntry:
    return MessageEntry.new(Message.user(f"try {n}.{part}: the same question again"))


async def build(store: SessionStore, depth: int, rng: random.Random) -> list[int]:
    """The chain; each session's number of entries."""
    counts = [1]
    await store.create(meta(0))
    await store.append("s0", entry(0, 0))
    for n in range(1, depth):
        await store.fork(f"s{n - 1}", meta=meta(n))
        own = [entry(n, part) for part in range(rng.randint(1, 2))]
        await store.append_many(f"s{n}", own)
        counts.append(counts[-1] + len(own))
    return counts


def cli(target: str, *argv: str, timeout: float, cwd: Path):
    return run([PYTHON, "-m", "sessionstore", *argv, "--db", target], timeout=timeout, cwd=cwd)


def timed(tally: Tally, group: str, step: str, started: float) -> None:
    seconds = time.perf_counter() - started
    print(f" [{group}: {step} {seconds:.1f} s]", end="", flush=True)
    tally.note(group, f"{step} ms", round(seconds * 1000))


def check_cli(trial: Trial, step: str, ran, expect: str | None = None) -> bool:
    if ran.status != "ok":
        trial.see(ran.status, f"{step}: {ran.status} {ran.tail()}")
        return False
    if ran.returncode != 0 or (expect is not None and expect not in ran.stdout):
        trial.see("lost", f"{step}: exit {ran.returncode}: {ran.stdout[-200:]} {ran.tail()}")
        return False
    return True


async def one_trial(
    tally: Tally, group: str, target: str, work: Path, depth: int, timeout: float, rng
) -> None:
    trial = Trial()
    async with await open_store(target) as store:
        started = time.perf_counter()
        counts = await build(store, depth, rng)
        timed(tally, group, "build", started)
        started = time.perf_counter()
        outcome, found = await attempt(store.summaries(limit=None), timeout)
        timed(tally, group, "summaries", started)
        if trial.step((outcome, found), "summaries"):
            entries = {s.meta.id: (s.entries, s.fault) for s in found}
            wanted = {f"s{n}": (count, None) for n, count in enumerate(counts)}
            if entries != wanted:
                trial.see("lost", "summaries: wrong counts or faults")
    started = time.perf_counter()
    ran = cli(target, "ls", "--tree", timeout=timeout, cwd=work)
    timed(tally, group, "ls --tree", started)
    if check_cli(trial, "ls --tree", ran):
        drawn = {word for line in ran.stdout.splitlines() for word in line.split()}
        if not all(f"s{n}" in drawn for n in range(depth)):
            trial.see("lost", "ls --tree: a session is missing")
    started = time.perf_counter()
    ran = cli(target, "verify", timeout=timeout, cwd=work)
    timed(tally, group, "verify", started)
    check_cli(trial, "verify", ran, expect="ok")
    exported = work / "export"
    started = time.perf_counter()
    ran = cli(target, "export", str(exported), timeout=timeout, cwd=work)
    timed(tally, group, "export", started)
    if check_cli(trial, "export", ran):
        files = list((exported / "sessions").glob("*.jsonl"))
        deepest = exported / "sessions" / f"s{depth - 1}.jsonl"
        lines = deepest.read_bytes().count(b"\n") if deepest.exists() else 0
        if len(files) != depth or lines != counts[-1] + 1:
            trial.see("lost", f"export: {len(files)} files, the deepest {lines} lines")
    retired = work / "retired"
    started = time.perf_counter()
    argv = ("retire", "--to", str(retired), "--before", "2100-01-01", "--yes")  # every session
    ran = cli(target, *argv, timeout=timeout, cwd=work)
    timed(tally, group, "retire", started)
    if check_cli(trial, "retire", ran):
        async with await open_store(target) as store:
            left = await store.list()
        files = list((retired / "sessions").glob("*.jsonl"))
        if left or len(files) != depth:
            trial.see("lost", f"retire: {len(left)} left in the store, {len(files)} archived")
    tally.add(group, trial.outcome, trial.summary())


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def campaign(args: argparse.Namespace, tally: Tally) -> None:
    rng = random.Random(args.seed)
    for backend in args.backends:
        if backend == "postgresql" and not args.pg_url:
            print(f"\n(postgresql skipped: no --pg-url nor {'SESSIONSTORE_PG_URL'})")
            continue
        for number in range(args.trials):
            work = Path(tempfile.mkdtemp(prefix="adv-deep-"))
            schema = f"adv_deep_{os.getpid()}_{number}"
            try:
                if backend == "postgresql":
                    target = pg_schema(args.pg_url, schema)
                elif backend == "sqlite":
                    target = f"sqlite:///{work / 'store.db'}"
                else:
                    target = str(work / "store")
                await one_trial(tally, backend, target, work, args.depth, args.timeout, rng)
            finally:
                if backend == "postgresql":
                    drop_schema(args.pg_url, schema)
                cleanup(work)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=1200)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--pg-url", default=os.environ.get("SESSIONSTORE_PG_URL"))
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--output")
    args = parser.parse_args()
    args.backends = [b for b in args.backends.split(",") if b]
    unknown = set(args.backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; the backends are {BACKENDS}")
    print(f"seed {args.seed}, depth {args.depth}")
    tally = Tally(f"deep forks: a chain {args.depth:,} deep")
    asyncio.run(campaign(args, tally))
    return finish(tally, args.output)


if __name__ == "__main__":
    sys.exit(main())
