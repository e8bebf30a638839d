"""Full-disk campaign: a small tmpfs fills up while stores append, journals
write, and archives are exported and imported.

Mounts one tmpfs (2 MiB by default; needs root) for the run, and for each
trial fills it with a filler file leaving a random number of bytes free,
then:

* ``jsonl`` / ``sqlite``: a store in the tmpfs appends entries of random
  sizes and ``append_many`` batches until three calls failed. Each failure
  must be a `SessionStoreError` (``crash`` otherwise), and leave the session
  exactly as before the call, nothing of a failed batch stored (``lost``
  otherwise). A fresh store object then loads and verifies the session;
  the filler is removed and the last failed call is retried: it must go
  through, once (no duplicate).
* ``journal (file)`` / ``journal (sqlite)``: journal appends until three
  failed; every append that returned reads back, at most one torn line per
  failure is skipped; after freeing space, an append goes through.
* ``export``: a store outside the tmpfs (about 0.5 MB) is exported into it.
  The export either completes, with every file equal to the store, or raises
  a `SessionStoreError`, leaving no partial file under a final name; after
  freeing space, the export run again completes and equals the store.
* ``import -> jsonl`` / ``import -> sqlite``: that archive is imported into
  a store in the tmpfs: each session is whole or absent; after freeing
  space, the import run again completes and the store equals the archive.

Usage: python scripts/adversarial/full_disk.py [--trials 12] [--size 2m]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import Tally, Trial, attempt, cleanup, finish, random_entry, random_size, tmpfs

from sessionstore import (
    Journal,
    PostWrite,
    SessionHeader,
    SessionMeta,
    Timestamp,
    encode,
    export_archive,
    import_archive,
    open_store,
)
from sessionstore.verify import verify_store

GROUPS = (
    "jsonl",
    "sqlite",
    "journal (file)",
    "journal (sqlite)",
    "export",
    "import -> jsonl",
    "import -> sqlite",
)
FILLER = "filler"


def fill(root: Path, free: int) -> None:
    """Leave about ``free`` bytes free on the filesystem of ``root``."""
    stat = os.statvfs(root)
    size = max(0, stat.f_bavail * stat.f_frsize - free)
    with (root / FILLER).open("wb") as file:
        while size > 0:
            try:
                size -= file.write(b"\0" * min(size, 1 << 20))
            except OSError:
                break


def unfill(root: Path) -> None:
    (root / FILLER).unlink(missing_ok=True)


async def lines_of(store, session_id: str) -> list[str]:
    return [line async for line in store.raw_lines(session_id)][1:]


async def check_fresh(target: str, expected: dict[str, list[str]], trial: Trial, when: str) -> None:
    """A new store object loads every session as expected, and verifies."""
    async with open_store(target) as store:
        for session_id, lines in expected.items():
            got = await attempt(lines_of(store, session_id))
            if trial.step(got, f"{when}: loading {session_id}") and got[1] != lines:
                trial.see(
                    "lost", f"{when}: {session_id} holds {len(got[1])} lines, not {len(lines)}"
                )
            trial.step(await attempt(store.load(session_id)), f"{when}: decoding {session_id}")
        report = await attempt(verify_store(store))
        if trial.step(report, f"{when}: verify") and report[1].faults:
            trial.see("lost", f"{when}: verify: {report[1].faults[0]}")


# ---------------------------------------------------------------- appends


async def store_trial(kind: str, root: Path, rng: random.Random, trial: Trial) -> None:
    target = str(root / "store") if kind == "jsonl" else str(root / "store.db")
    expected: list[str] = []
    pending = None  # the last call that failed: (entries, their lines)
    async with open_store(target) as store:
        await store.create(SessionMeta(id="s", created_at="2026-01-01T00:00:00Z"))
        fill(root, rng.randrange(0, 200_000))
        failures = 0
        for n in range(400):
            count = 1 if rng.random() < 0.5 else rng.randint(2, 10)
            sizes = [random_size(rng, 64_000) for _ in range(count)]
            entries = [random_entry(rng, size, f"e{n}-{i}", []) for i, size in enumerate(sizes)]
            call = store.append("s", entries[0]) if count == 1 else store.append_many("s", entries)
            outcome, value = await attempt(call)
            lines = [encode(e) for e in entries]
            if outcome == "ok":
                expected += lines
                continue
            trial.see(outcome, f"{'append' if count == 1 else 'append_many'}: {value}")
            pending = (entries, lines)
            now = await attempt(lines_of(store, "s"))
            if trial.step(now, "loading after a failed call") and now[1] != expected:
                extra = len(now[1]) - len(expected)
                trial.see("lost", f"a failed call of {count} left {extra} lines behind")
                expected = now[1]  # judge what follows from what is there
            failures += 1
            if failures == 3:
                break
        if failures == 0:
            trial.see("lost", "the disk never filled: no call failed")
    await check_fresh(target, {"s": expected}, trial, "disk full")
    unfill(root)
    if pending is not None:
        async with open_store(target) as store:
            entries, lines = pending
            call = (
                store.append("s", entries[0])
                if len(entries) == 1
                else store.append_many("s", entries)
            )
            if trial.step(await attempt(call), "retry after freeing space"):
                expected += lines
    await check_fresh(target, {"s": expected}, trial, "after freeing space")


# ---------------------------------------------------------------- journals


async def journal_trial(kind: str, root: Path, rng: random.Random, trial: Trial) -> None:
    target = str(root / "store") if kind == "journal (file)" else str(root / "store.db")
    async with open_store(target) as store:
        journal = store.journal("agent")
        await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m" * 50), Journal())
        fill(root, rng.randrange(0, 100_000))
        returned, failures = [], 0
        model = "x" * rng.randrange(100, 20_000)  # long headers fill the disk sooner
        for n in range(20_000):
            if n % 10 == 0:
                line = SessionHeader(started_at=Timestamp.now(), model=model)
            else:
                line = PostWrite(at=Timestamp.now(), id=uuid.uuid4())
            outcome, value = await attempt(journal.append(line))
            if outcome == "ok":
                if isinstance(line, PostWrite):
                    returned.append(line.id)
                continue
            trial.see(outcome, f"journal append: {value}")
            failures += 1
            if failures == 3:
                break
        if failures == 0:
            trial.see("lost", "the disk never filled: no append failed")
    for when in ("disk full", "after freeing space"):
        if when == "after freeing space":
            unfill(root)
        async with open_store(target) as store:
            journal = store.journal("agent")
            if when == "after freeing space":
                last = uuid.uuid4()
                if trial.step(
                    await attempt(journal.append(PostWrite(at=Timestamp.now(), id=last))),
                    "append after freeing",
                ):
                    returned.append(last)
            read = await attempt(journal.read())
            if not trial.step(read, f"{when}: read"):
                continue
            ids = [w.id for s in read[1].sessions for w in s.writes]
            if ids != returned:
                trial.see("lost", f"{when}: {len(returned)} writes returned, {len(ids)} read back")
            if len(read[1].skipped) > failures:
                trial.see(
                    "lost", f"{when}: {len(read[1].skipped)} lines skipped, {failures} failures"
                )


# ---------------------------------------------------------------- archives


async def make_source(root: Path) -> tuple[str, Path]:
    """A SQLite store of about 0.5 MB outside the tmpfs, and its archive."""
    rng = random.Random(11)
    target = str(root / "source.db")
    async with open_store(target) as store:
        for s in range(12):
            sid = f"src-{s}"
            await store.create(SessionMeta(id=sid, created_at="2026-01-01T00:00:00Z"))
            entries = [
                random_entry(rng, rng.randrange(500, 2000), f"{sid}-{i}", []) for i in range(30)
            ]
            await store.append_many(sid, entries)
        for j in range(2):
            journal = store.journal(f"journal-{j}")
            await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), Journal())
            for _ in range(200):
                await journal.append(PostWrite(at=Timestamp.now(), id=uuid.uuid4()))
        await export_archive(store, root / "archive")
    return target, root / "archive"


async def blob_of(store, session_id: str) -> bytes:
    return b"".join([block async for block in store.raw_blocks(session_id)])


def archive_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


async def export_trial(source: str, archive: Path, root: Path, rng: random.Random, trial: Trial):
    want = archive_of(archive)
    dest = root / "archive"
    fill(root, rng.randrange(0, 700_000))
    async with open_store(source) as store:
        first = await attempt(export_archive(store, dest))
        trial.see(first[0], f"export: {first[1]}")
        got = archive_of(dest) if dest.exists() else {}
        wrong = [name for name, data in got.items() if want.get(name) != data]
        if wrong:
            trial.see("lost", f"export into a full disk left {wrong[0]} not as in the store")
        if first[0] == "ok" and got != want:
            trial.see("lost", "export returned, but the archive does not hold the store")
        unfill(root)
        again = await attempt(export_archive(store, dest))
        if trial.step(again, "export after freeing space") and archive_of(dest) != want:
            trial.see("lost", "export after freeing space: the archive does not hold the store")


async def import_trial(kind: str, archive: Path, root: Path, rng: random.Random, trial: Trial):
    want = archive_of(archive)
    target = str(root / "store") if kind == "import -> jsonl" else str(root / "store.db")
    async with open_store(target) as store:
        await store.list()  # the schema, before the disk fills
        fill(root, rng.randrange(0, 700_000))
        first = await attempt(import_archive(store, archive))
        trial.see(first[0], f"import: {first[1]}")
    for when in ("disk full", "after freeing space"):
        async with open_store(target) as store:
            if when == "after freeing space":
                unfill(root)
                trial.step(
                    await attempt(import_archive(store, archive)), "import after freeing space"
                )
            listed = await attempt(store.list())
            if not trial.step(listed, f"{when}: list"):
                continue
            for meta in listed[1]:
                got = await attempt(blob_of(store, meta.id))
                whole = want.get(f"sessions/{meta.id}.jsonl")
                if trial.step(got, f"{when}: reading {meta.id}") and got[1] != whole:
                    trial.see("lost", f"{when}: session {meta.id} is not whole")
            if when == "after freeing space":
                for name, data in want.items():
                    if name.startswith("journals/"):
                        held = await store.journal(name.split("/")[1]).read_bytes()
                        if held != data:
                            trial.see("lost", f"{name} not imported whole")
                    elif (await attempt(store.load(name[9:-6])))[0] != "ok":
                        trial.see("lost", f"{name} not imported")
            report = await attempt(verify_store(store))
            if trial.step(report, f"{when}: verify") and report[1].faults:
                trial.see("lost", f"{when}: verify: {report[1].faults[0]}")


# ---------------------------------------------------------------- the campaign


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=12, help="trials per group (12)")
    parser.add_argument("--size", default="2m", help="the tmpfs's size (2m)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("full_disk.py mounts a tmpfs: run it as root")
    groups = opts.groups.split(",")
    print(
        f"full-disk campaign, seed {opts.seed}, {opts.trials} trials per group, tmpfs {opts.size}"
    )
    tally = Tally(
        f"full_disk.py: {opts.trials} trials per group, tmpfs {opts.size}, seed {opts.seed}"
    )
    with tempfile.TemporaryDirectory(prefix="adv-full-") as scratch, tmpfs(opts.size) as disk:
        source, archive = asyncio.run(make_source(Path(scratch)))
        for group in groups:
            print(f"\n{group}: ", end="", flush=True)
            for number in range(opts.trials):
                rng = random.Random(f"{opts.seed}-{group}-{number}")
                root = disk / f"t{number}"
                root.mkdir()
                trial = Trial()
                if group in ("jsonl", "sqlite"):
                    job = store_trial(group, root, rng, trial)
                elif group.startswith("journal"):
                    job = journal_trial(group, root, rng, trial)
                elif group == "export":
                    job = export_trial(source, archive, root, rng, trial)
                else:
                    job = import_trial(group, archive, root, rng, trial)
                outcome = asyncio.run(attempt(job, 300))
                if outcome[0] != "ok":
                    trial.see(outcome[0], f"trial: {outcome[1]}")
                tally.add(group, trial.outcome, f"trial {number}: {trial.summary()}")
                cleanup(root)
    return finish(tally, opts.output)


if __name__ == "__main__":
    sys.exit(main())
