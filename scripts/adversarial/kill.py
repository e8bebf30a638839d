"""Kill campaign: SIGKILL writer processes at random moments, then check the store.

For each backend (jsonl, sqlite, postgresql), each trial:

1. makes a fresh store (a directory, a database file, or a PostgreSQL schema)
   with three shared sessions and a shared journal; in ``export`` trials,
   twenty more sessions to export;
2. starts one or two writer processes, in one of five modes (in turn):
   ``appends`` (appends of random sizes and ``append_many`` batches, two
   writers on the same sessions), ``journal`` (journal appends and clears),
   ``import`` (an archive of 40 sessions and 3 journals), ``export`` (exports
   racing appends) and ``mixed`` (all of these at once);
3. SIGKILLs each writer at a random moment;
4. checks the store with a fresh process (``kill.py _check``).

A writer reports each operation before it starts and after it returns, one
JSON line each, flushed. The check then holds the store to the docs:

* every append and batch that returned is present exactly once, its line
  byte for byte, each writer's in its order; an operation in flight is
  whole or absent; nothing else is there (``lost`` otherwise);
* `verify_store` finds no fault (``lost`` otherwise);
* each journal holds every write that returned since its last clear, and
  nothing cleared; at most one torn line per killed writer is skipped;
* an interrupted import, run again, completes and the store then holds the
  archive byte for byte; an interrupted export left only whole files (each
  a prefix of its session), and run again it completes and the archive
  then equals the store.

Usage: python scripts/adversarial/kill.py [--trials 30] [--backends jsonl,sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import (
    PYTHON,
    Tally,
    attempt,
    cleanup,
    finish,
    kill_group,
    pg_cluster,
    pg_schema,
    random_entry,
    random_size,
    run,
    sha,
    spawn,
    worst,
)

from sessionstore import (
    Journal,
    PostWrite,
    SessionHeader,
    SessionMeta,
    SessionStoreError,
    Timestamp,
    encode,
    export_archive,
    import_archive,
    open_store,
)
from sessionstore.verify import verify_store

SCRIPT = Path(__file__).resolve()
MODES = ("appends", "journal", "import", "export", "mixed")
SHARED = ["s0", "s1", "s2"]  # sessions every writer appends to
SHARED_JOURNAL = "shared"  # appended to by every writer, never cleared


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- the writer


async def appender(store, rng: random.Random, tag: str, most: int) -> None:
    prior: dict[str, list[str]] = {sid: [] for sid in SHARED}
    for n in range(10**9):
        sid = rng.choice(SHARED)
        count = 1 if rng.random() < 0.6 else rng.randint(2, 12)
        entries = [
            random_entry(rng, random_size(rng, most), f"{tag}-{n}-{i}", prior[sid])
            for i in range(count)
        ]
        op = "append" if count == 1 else "batch"
        emit(
            {
                "ev": "start",
                "op": op,
                "sid": sid,
                "ids": [e.id for e in entries],
                "h": [sha(encode(e)) for e in entries],
            }
        )
        try:
            if count == 1:
                await store.append(sid, entries[0])
            else:
                await store.append_many(sid, entries)
        except SessionStoreError as exc:  # reported; anything else is a crash
            emit({"ev": "error", "op": op, "what": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        emit({"ev": "done", "op": op, "sid": sid, "ids": [e.id for e in entries]})
        prior[sid] = [*prior[sid][-20:], *(e.id for e in entries if e.type == "message")]


async def journaler(store, rng: random.Random, tag: str) -> None:
    own = store.journal(f"agent-{tag}")
    shared = store.journal(SHARED_JOURNAL)
    header = SessionHeader(started_at=Timestamp.now(), model="m")
    await own.begin(header, await own.read())
    while True:
        if rng.random() < 0.04:
            emit({"ev": "start", "op": "clear", "journal": f"agent-{tag}"})
            await own.clear()
            emit({"ev": "done", "op": "clear", "journal": f"agent-{tag}"})
            await own.begin(header, Journal())
            continue
        name, journal = (SHARED_JOURNAL, shared) if rng.random() < 0.3 else (f"agent-{tag}", own)
        post = uuid.uuid4()
        emit({"ev": "start", "op": "post", "journal": name, "id": str(post)})
        await journal.append(PostWrite(at=Timestamp.now(), id=post))
        emit({"ev": "done", "op": "post", "journal": name, "id": str(post)})


async def exporter(store, dest: str) -> None:
    while True:
        emit({"ev": "start", "op": "export"})
        await export_archive(store, dest)
        emit({"ev": "done", "op": "export"})


async def importer(store, src: str) -> None:
    emit({"ev": "start", "op": "import"})
    await import_archive(store, src)
    emit({"ev": "done", "op": "import"})
    await asyncio.Event().wait()  # until killed


async def writer(opts: dict) -> None:
    rng = random.Random(opts["seed"])
    mode, tag, first = opts["mode"], opts["tag"], opts["tag"] == "w0"
    async with open_store(opts["target"]) as store:
        emit({"ev": "ready"})
        jobs = []
        if mode in ("appends", "mixed") or (mode == "export" and not first):
            jobs.append(appender(store, rng, tag, 300_000 if mode == "appends" else 60_000))
        if mode in ("journal", "mixed"):
            jobs.append(journaler(store, random.Random(rng.random()), tag))
        if first and mode in ("export", "mixed"):
            jobs.append(exporter(store, opts["export"]))
        if first and mode == "import":
            jobs.append(importer(store, opts["archive"]))
        await asyncio.gather(*jobs)


# ---------------------------------------------------------------- the check


def read_events(path: str) -> list[dict]:
    events = []
    for line in Path(path).read_text().splitlines():
        # A line cut by the kill is left out: its operation never reported returning.
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return events


def check_appends(stored: dict[str, list[tuple[str, str]]], writers: list[list[dict]]) -> list[str]:
    """Returned appends present once, in each writer's order, whole; nothing foreign."""
    lost = []
    places = {}
    for sid, rows in stored.items():
        for at, (entry_id, _) in enumerate(rows):
            if (sid, entry_id) in places:
                lost.append(f"{sid}: entry {entry_id} stored twice")
            places[sid, entry_id] = at
    known = set()
    for events in writers:
        starts = {}
        last_at: dict[str, int] = {}
        for event in events:
            if event.get("op") not in ("append", "batch"):
                continue
            if event["ev"] == "start":
                starts[event["ids"][0]] = event
                known.update((event["sid"], i) for i in event["ids"])
                continue
            if event["ev"] != "done":
                continue
            start = starts[event["ids"][0]]
            sid = start["sid"]
            spots = [places.get((sid, i)) for i in start["ids"]]
            if None in spots:
                lost.append(f"{sid}: returned {start['op']} {start['ids'][0]} missing")
                continue
            if spots != list(range(spots[0], spots[0] + len(spots))):
                lost.append(f"{sid}: batch {start['ids'][0]} not contiguous: {spots}")
            for i, h, at in zip(start["ids"], start["h"], spots, strict=True):
                if stored[sid][at][1] != h:
                    lost.append(f"{sid}: entry {i} stored with another line")
            if spots[0] < last_at.get(sid, -1):
                lost.append(f"{sid}: {start['ids'][0]} stored before an earlier append")
            last_at[sid] = spots[-1]
        # In flight (started, never reported): whole or absent.
        done = {e["ids"][0] for e in events if e.get("ev") == "done" and "ids" in e}
        for first, start in starts.items():
            if first in done:
                continue
            spots = [places.get((start["sid"], i)) for i in start["ids"]]
            present = [s for s in spots if s is not None]
            if present and len(present) != len(spots):
                lost.append(f"{start['sid']}: batch {first} in flight is partly stored: {spots}")
    for sid, rows in stored.items():
        if sid not in SHARED:
            continue
        foreign = [i for i, _ in rows if (sid, i) not in known]
        if foreign:
            lost.append(f"{sid}: {len(foreign)} entries no writer started, e.g. {foreign[0]}")
    return lost


def post_ids(journal: Journal) -> list[str]:
    return [str(w.id) for s in journal.sessions for w in s.writes]


def check_journals(read: dict[str, Journal], writers: list[list[dict]], killed: int) -> list[str]:
    """Each returned write since the last returned clear is there; nothing cleared is."""
    lost = []
    shared_done, shared_started = set(), set()
    for events in writers:
        by_journal: dict[str, list[dict]] = {}
        for event in events:
            if event.get("op") in ("post", "clear"):
                by_journal.setdefault(event["journal"], []).append(event)
        for name, evs in by_journal.items():
            posts = post_ids(read.get(name, Journal()))
            if name == SHARED_JOURNAL:
                shared_done |= {e["id"] for e in evs if e["ev"] == "done"}
                shared_started |= {e["id"] for e in evs}
                continue
            cleared = [n for n, e in enumerate(evs) if e["op"] == "clear" and e["ev"] == "done"]
            since = evs[cleared[-1] + 1 :] if cleared else evs
            clearing = any(e["op"] == "clear" and e["ev"] == "start" for e in since)
            expected = {e["id"] for e in since if e["op"] == "post" and e["ev"] == "done"}
            allowed = {e["id"] for e in since if e["op"] == "post"}
            if clearing and not posts:
                continue  # the clear in flight went through
            if not expected <= set(posts):
                lost.append(f"journal {name}: {len(expected - set(posts))} returned writes missing")
            if not set(posts) <= allowed:
                lost.append(f"journal {name}: {len(set(posts) - allowed)} cleared writes are back")
    shared = post_ids(read.get(SHARED_JOURNAL, Journal()))
    if not shared_done <= set(shared):
        lost.append(f"journal shared: {len(shared_done - set(shared))} returned writes missing")
    if len(shared) != len(set(shared)) or not set(shared) <= shared_started:
        lost.append("journal shared: a write twice, or one no writer made")
    for name, journal in read.items():
        if len(journal.skipped) > killed:
            lost.append(f"journal {name}: {len(journal.skipped)} lines skipped, {killed} writers")
    return lost


async def session_lines(store) -> tuple[dict, dict]:
    """Every session's entries as (id, digest of line), and its file's bytes."""
    stored, blobs = {}, {}
    for meta in await store.list():
        blocks = [block async for block in store.raw_blocks(meta.id)]
        blob = b"".join(blocks)
        lines = blob.split(b"\n")[1:-1]
        stored[meta.id] = [(json.loads(line)["id"], sha(line)) for line in lines]
        blobs[meta.id] = blob
    return stored, blobs


def archive_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".tmp-" not in p.name
    }


async def check(opts: dict) -> dict:
    found: dict = {"lost": [], "clean": [], "crash": [], "hang": [], "notes": [], "checked": {}}

    def judge_step(outcome: str, value, what: str) -> bool:
        if outcome == "ok":
            return True
        found[outcome].append(f"{what}: {value}")
        return False

    writers = [read_events(path) for path in opts["events"]]
    checked = found["checked"]
    for events in writers:
        for event in events:
            if event.get("ev") == "done":
                what = f"returned {event['op']} calls checked"
                checked[what] = checked.get(what, 0) + 1
    for events in writers:
        for event in events:
            if event.get("ev") == "error":
                found["clean"].append(f"writer: {event['op']}: {event['what']}")
    async with open_store(opts["target"]) as store:
        outcome, value = await attempt(session_lines(store), 120)
        if not judge_step(outcome, value, "reading every session"):
            return found
        stored, blobs = value
        found["lost"] += check_appends(stored, writers)
        expected = json.loads(Path(opts["prepopulated"]).read_text())
        for sid, hashes in expected.items():
            if [h for _, h in stored.get(sid, [])][: len(hashes)] != hashes:
                found["lost"].append(f"{sid}: history before the trial changed")

        names = {SHARED_JOURNAL} | {e["journal"] for ev in writers for e in ev if "journal" in e}
        outcome, value = await attempt(
            asyncio.gather(*(store.journal(n).read() for n in sorted(names))), 60
        )
        if judge_step(outcome, value, "reading journals"):
            read = dict(zip(sorted(names), value, strict=True))
            found["lost"] += check_journals(read, writers, opts["killed"])
            skipped = sum(len(j.skipped) for j in read.values())
            if skipped:
                found["notes"].append(f"{skipped} torn journal line(s) skipped")

        if opts["mode"] == "import":
            archive = Path(opts["archive"])
            outcome, value = await attempt(import_archive(store, archive), 120)
            if judge_step(outcome, value, "import run again"):
                _, blobs = await session_lines(store)
                for path in (archive / "sessions").glob("*.jsonl"):
                    if blobs.get(path.stem) != path.read_bytes():
                        found["lost"].append(f"import run again: {path.stem} differs from archive")
                for path in (archive / "journals").glob("*/session_journal.jsonl"):
                    if await store.journal(path.parent.name).read_bytes() != path.read_bytes():
                        found["lost"].append(f"import run again: journal {path.parent.name}")

        if opts["mode"] in ("export", "mixed"):
            dest = Path(opts["export"])
            before = archive_files(dest) if dest.exists() else {}
            leftovers = [p for p in dest.rglob("*") if ".tmp-" in p.name] if dest.exists() else []
            if leftovers:
                found["notes"].append(f"{len(leftovers)} export temporary file(s) left")
            for name, data in before.items():
                sid = name.removeprefix("sessions/").removesuffix(".jsonl")
                if name.startswith("sessions/") and not blobs.get(sid, b"").startswith(data):
                    found["lost"].append(f"interrupted export: {name} is not a session's prefix")
                # A journal is exported as it stands, a torn last line included.
                if name.startswith("sessions/") and not data.endswith(b"\n"):
                    found["lost"].append(f"interrupted export: {name} ends inside a line")
            outcome, value = await attempt(export_archive(store, dest), 120)
            if judge_step(outcome, value, "export run again"):
                after = archive_files(dest)
                _, blobs = await session_lines(store)
                for sid, blob in blobs.items():
                    if after.get(f"sessions/{sid}.jsonl") != blob:
                        found["lost"].append(f"export run again: {sid} differs from the store")
                for name in await store.journals():
                    data = await store.journal(name).read_bytes()
                    if data and after.get(f"journals/{name}/session_journal.jsonl") != data:
                        found["lost"].append(f"export run again: journal {name} differs")

        outcome, value = await attempt(verify_store(store), 120)
        if judge_step(outcome, value, "verify"):
            found["lost"] += [f"verify: {fault}" for fault in value.faults]
    return found


# ---------------------------------------------------------------- the campaign


async def prepare_archive(root: Path) -> Path:
    """An archive of 40 sessions and 3 journals, the same for every import trial."""
    rng = random.Random(7)
    archive = root / "archive"
    async with open_store("memory://") as store:
        for s in range(40):
            sid = f"imported-{s}"
            await store.create(SessionMeta(id=sid, created_at="2026-01-01T00:00:00Z"))
            sizes = [random_size(rng, 40_000) for _ in range(30)]
            entries = [random_entry(rng, n, f"{sid}-{i}", []) for i, n in enumerate(sizes)]
            await store.append_many(sid, entries)
        for j in range(3):
            journal = store.journal(f"imported-journal-{j}")
            await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), Journal())
            for _ in range(50):
                await journal.append(PostWrite(at=Timestamp.now(), id=uuid.uuid4()))
        await export_archive(store, archive)
    return archive


async def set_up(target: str, mode: str, rng: random.Random, expected: Path) -> None:
    """The store before the writers start; what it holds is written to ``expected``."""
    hashes: dict[str, list[str]] = {}
    async with open_store(target) as store:
        for sid in SHARED:
            await store.create(SessionMeta(id=sid, created_at="2026-01-01T00:00:00Z"))
            hashes[sid] = []
        journal = store.journal(SHARED_JOURNAL)
        await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), Journal())
        if mode == "export":
            for s in range(20):
                sid = f"pre-{s}"
                await store.create(SessionMeta(id=sid, created_at="2026-01-01T00:00:00Z"))
                entries = [
                    random_entry(rng, random_size(rng, 20_000), f"{sid}-{i}", []) for i in range(30)
                ]
                await store.append_many(sid, entries)
                hashes[sid] = [sha(encode(e)) for e in entries]
    expected.write_text(json.dumps(hashes))


def wait_ready(paths: list[Path], processes, timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.exists() and b'"ready"' in p.read_bytes() for p in paths):
            return True
        if any(proc.poll() is not None for proc in processes):
            return False
        time.sleep(0.05)
    return False


def trial(backend: str, number: int, opts, pg_url, archive: Path, tally: Tally) -> None:
    rng = random.Random(f"{opts.seed}-{backend}-{number}")
    mode = MODES[number % len(MODES)]
    root = Path(tempfile.mkdtemp(prefix=f"adv-kill-{backend}-"))
    try:
        if backend == "jsonl":
            target = str(root / "store")
        elif backend == "sqlite":
            target = str(root / "store.db")
        else:
            target = pg_schema(pg_url, f"kill_{opts.seed}_{number}_{uuid.uuid4().hex[:6]}")
        expected = root / "expected.json"
        asyncio.run(set_up(target, mode, rng, expected))
        tags = ["w0"] if mode == "import" else ["w0", "w1"]
        events = [root / f"{tag}.events" for tag in tags]
        errors = [root / f"{tag}.stderr" for tag in tags]
        processes = []
        for tag, out, err in zip(tags, events, errors, strict=True):
            writer_opts = {
                "target": target,
                "mode": mode,
                "tag": tag,
                "seed": rng.random(),
                "archive": str(archive),
                "export": str(root / "export"),
            }
            with out.open("wb") as stdout, err.open("wb") as stderr:
                argv = [PYTHON, str(SCRIPT), "_writer", json.dumps(writer_opts)]
                processes.append(spawn(argv, stdout=stdout, stderr=stderr))
        ready = wait_ready(events, processes)
        outcome, details = "ok", []
        if ready:
            time.sleep(rng.uniform(0.05, 1.0))
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                time.sleep(rng.uniform(0, 0.3))
        for process in processes:
            kill_group(process)
        for err in errors:
            text = err.read_text(errors="replace")
            if "Traceback" in text:
                outcome = "crash"
                details.append(f"writer: {text.strip().splitlines()[-1][:300]}")
        if not ready and outcome == "ok":
            outcome, details = "hang", ["writer never reported ready"]
        payload = {
            "target": target,
            "mode": mode,
            "events": [str(p) for p in events],
            "archive": str(archive),
            "export": str(root / "export"),
            "prepopulated": str(expected),
            "killed": len(processes),
        }
        ran = run([PYTHON, str(SCRIPT), "_check", json.dumps(payload)], timeout=300)
        if ran.status != "ok" or ran.result is None:
            outcome = worst(outcome, "hang" if ran.status == "hang" else "crash")
            details.append(f"check {ran.status}: {ran.tail()}")
        else:
            for kind in ("clean", "crash", "hang", "lost"):
                if ran.result[kind]:
                    outcome = worst(outcome, kind)
                    details += ran.result[kind][:3]
            for what, amount in ran.result["checked"].items():
                tally.note(backend, what, amount)
            for note in ran.result["notes"]:
                tally.note(backend, note.split(" ", 1)[1] if note[0].isdigit() else note)
        tally.add(backend, outcome, f"trial {number} ({mode}): " + "; ".join(details))
        if outcome in ("ok", "clean") or not opts.keep:
            cleanup(root)
        else:
            print(f"\n[kept {root}]", flush=True)
    except BaseException:
        cleanup(root)
        raise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30, help="trials per backend (30)")
    parser.add_argument("--backends", default="jsonl,sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--pg-url", help="a PostgreSQL URL (else a throwaway cluster is started)")
    parser.add_argument("--pg-dir", default="/tmp/pg/adv-kill", help="where to start that cluster")
    parser.add_argument("--keep", action="store_true", help="keep the directories of failed trials")
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    backends = opts.backends.split(",")
    print(f"kill campaign, seed {opts.seed}, {opts.trials} trials per backend")
    tally = Tally(f"kill.py: {opts.trials} trials per backend, seed {opts.seed}")
    with tempfile.TemporaryDirectory(prefix="adv-kill-archive-") as scratch:
        archive = asyncio.run(prepare_archive(Path(scratch)))
        # A cluster is started only when PostgreSQL is tried and no URL is given.
        wanted = "postgresql" in backends
        with pg_cluster(opts.pg_url or ("" if wanted else "unused"), opts.pg_dir) as (url, _):
            for backend in backends:
                print(f"\n{backend}: ", end="", flush=True)
                for number in range(opts.trials):
                    trial(backend, number, opts, url, archive, tally)
    return finish(tally, opts.output)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_writer":
        asyncio.run(writer(json.loads(sys.argv[2])))
    elif len(sys.argv) > 2 and sys.argv[1] == "_check":
        print("RESULT " + json.dumps(asyncio.run(check(json.loads(sys.argv[2])))), flush=True)
    else:
        sys.exit(main())
