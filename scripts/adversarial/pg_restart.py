"""PostgreSQL restart campaign: restart the server under writers' load.

Starts a throwaway cluster of its own (``.ci/postgres start /tmp/pg/adv``,
stopped at the end); it never restarts any other server. Each trial, in a
fresh schema, starts N writer processes (4 by default) appending single
entries and ``append_many`` batches to three shared sessions and writing
their journals, then, under that load, one of:

* ``restart -m fast``: ``pg_ctl restart -m fast`` (clients disconnected);
* ``restart -m immediate``: the server stops without a checkpoint, and
  recovers from its WAL at start, as after a crash;
* ``stop, 3 s down, start``: an outage the writers must ride out.

The writers go on for a few seconds after the server is back, then stop.
Each call has a 30 s timeout (a hang otherwise). The figures:

* a failure during the outage must be a `SessionStoreError` (a
  `StorageError`), else ``crash``;
* every writer must have an append return after the server is back, else
  ``hang`` (the store never recovered);
* then a fresh process checks, as kill.py does: every append and journal
  write that returned is there once, in order, batches whole; nothing else;
  `verify_store` is clean (``lost`` otherwise).

Usage: python scripts/adversarial/pg_restart.py [--trials 6] [--writers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import (
    PYTHON,
    Tally,
    cleanup,
    finish,
    kill_group,
    pg_bin,
    pg_cluster,
    pg_schema,
    random_entry,
    random_size,
    run,
    sha,
    spawn,
    worst,
)
from kill import SHARED, emit, set_up, wait_ready

from sessionstore import PostWrite, SessionStoreError, Timestamp, encode, open_store

SCRIPT = Path(__file__).resolve()
KINDS = ("restart -m fast", "restart -m immediate", "stop, 3 s down, start")
CALL_TIMEOUT = 30


# ---------------------------------------------------------------- the writer


async def writer(opts: dict) -> None:
    rng = random.Random(opts["seed"])
    tag, stop = opts["tag"], Path(opts["stop"])
    async with open_store(opts["target"]) as store:
        journal = store.journal(f"agent-{tag}")
        emit({"ev": "ready"})
        for n in range(10**9):
            if stop.exists():
                break
            if rng.random() < 0.25:
                post = uuid.uuid4()
                start = {"op": "post", "journal": f"agent-{tag}", "id": str(post)}
                call = journal.append(PostWrite(at=Timestamp.now(), id=post))
            else:
                sid = rng.choice(SHARED)
                count = 1 if rng.random() < 0.6 else rng.randint(2, 8)
                entries = [
                    random_entry(rng, random_size(rng, 20_000), f"{tag}-{n}-{i}", [])
                    for i in range(count)
                ]
                op = "append" if count == 1 else "batch"
                ids = [e.id for e in entries]
                start = {"op": op, "sid": sid, "ids": ids, "h": [sha(encode(e)) for e in entries]}
                call = (
                    store.append(sid, entries[0]) if count == 1 else store.append_many(sid, entries)
                )
            emit({"ev": "start", **start, "t": time.time()})
            plain = {k: v for k, v in start.items() if k != "h"}
            try:
                await asyncio.wait_for(call, CALL_TIMEOUT)
            except TimeoutError:
                emit({"ev": "hang", **plain, "t": time.time()})
                continue
            except SessionStoreError as exc:
                what = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
                emit({"ev": "error", **plain, "what": what, "t": time.time()})
                await asyncio.sleep(0.1)
                continue
            except Exception as exc:  # outside the error tree: a crash, reported
                what = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
                emit({"ev": "crash", **plain, "what": what, "t": time.time()})
                await asyncio.sleep(0.1)
                continue
            emit({"ev": "done", **plain, "t": time.time()})


# ---------------------------------------------------------------- the campaign


def pg_ctl(data: Path, *args: str) -> None:
    """pg_ctl on our own cluster, as its owner."""
    command = [
        "runuser",
        "-u",
        "postgres",
        "--",
        str(pg_bin() / "pg_ctl"),
        "-D",
        str(data / "data"),
    ]
    subprocess.run([*command, *args], check=True, capture_output=True, timeout=120)


def disturb(kind: str, data: Path) -> None:
    log = str(data / "log")
    if kind == "restart -m fast":
        pg_ctl(data, "-m", "fast", "-l", log, "-w", "restart")
    elif kind == "restart -m immediate":
        pg_ctl(data, "-m", "immediate", "-l", log, "-w", "restart")
    else:
        pg_ctl(data, "-m", "fast", "-w", "stop")
        time.sleep(3)
        options = f"-k {data} -c listen_addresses='' -c fsync=on"
        pg_ctl(data, "-l", log, "-w", "-o", options, "start")


def trial(number: int, opts, url: str, data: Path, tally: Tally) -> None:
    rng = random.Random(f"{opts.seed}-{number}")
    kind = KINDS[number % len(KINDS)]
    group = f"postgresql, {kind}"
    root = Path(tempfile.mkdtemp(prefix="adv-pg-"))
    try:
        target = pg_schema(url, f"restart_{opts.seed}_{number}_{uuid.uuid4().hex[:6]}")
        expected = root / "expected.json"
        asyncio.run(set_up(target, "appends", rng, expected))
        tags = [f"w{n}" for n in range(opts.writers)]
        events = [root / f"{tag}.events" for tag in tags]
        errors = [root / f"{tag}.stderr" for tag in tags]
        stop = root / "stop"
        processes = []
        for tag, out, err in zip(tags, events, errors, strict=True):
            writer_opts = {"target": target, "tag": tag, "seed": rng.random(), "stop": str(stop)}
            with out.open("wb") as stdout, err.open("wb") as stderr:
                argv = [PYTHON, str(SCRIPT), "_writer", json.dumps(writer_opts)]
                processes.append(spawn(argv, stdout=stdout, stderr=stderr))
        outcome, details = "ok", []
        if not wait_ready(events, processes):
            outcome, details = "hang", ["a writer never reported ready"]
        time.sleep(2)
        disturb(kind, data)
        back = time.time()
        time.sleep(4)
        stop.touch()
        for process in processes:
            try:
                process.wait(CALL_TIMEOUT + 30)
            except subprocess.TimeoutExpired:
                outcome = worst(outcome, "hang")
                details.append("a writer did not stop")
            kill_group(process)
        for err in errors:
            text = err.read_text(errors="replace")
            if "Traceback" in text:
                outcome = worst(outcome, "crash")
                details.append(f"writer: {text.strip().splitlines()[-1][:300]}")
        failed = 0
        for tag, path in zip(tags, events, strict=True):
            log = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            for event in log:
                if event["ev"] in ("crash", "hang"):
                    outcome = worst(outcome, event["ev"])
                    details.append(f"{tag} {event['ev']}: {event.get('what', event['op'])}")
                failed += event["ev"] == "error"
            if not any(e["ev"] == "done" and e["t"] > back for e in log):
                outcome = worst(outcome, "hang")
                details.append(f"{tag}: no call returned after the server came back")
        if failed:
            outcome = worst(outcome, "clean")
            tally.note(group, "calls failed cleanly during the outage", failed)
        payload = {
            "target": target,
            "mode": "appends",
            "events": [str(p) for p in events],
            "archive": "",
            "export": "",
            "prepopulated": str(expected),
            "killed": 0,
        }
        ran = run(
            [PYTHON, str(SCRIPT.parent / "kill.py"), "_check", json.dumps(payload)], timeout=300
        )
        if ran.status != "ok" or ran.result is None:
            outcome = worst(outcome, "hang" if ran.status == "hang" else "crash")
            details.append(f"check {ran.status}: {ran.tail()}")
        else:
            for what in ("crash", "hang", "lost"):
                if ran.result[what]:
                    outcome = worst(outcome, what)
                    details += ran.result[what][:3]
            for what, amount in ran.result["checked"].items():
                tally.note(group, what, amount)
            if ran.result["clean"]:
                details.append(ran.result["clean"][0])
        tally.add(group, outcome, f"trial {number}: " + "; ".join(details))
    finally:
        cleanup(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=6, help="restarts, one per trial (6)")
    parser.add_argument("--writers", type=int, default=4, help="writer processes (4)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--pg-dir", default="/tmp/pg/adv", help="where our own cluster lives")
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    print(
        f"PostgreSQL restart campaign, seed {opts.seed}, {opts.trials} trials, "
        f"{opts.writers} writers"
    )
    tally = Tally(f"pg_restart.py: {opts.trials} trials, {opts.writers} writers, seed {opts.seed}")
    with pg_cluster(None, opts.pg_dir) as (url, data):
        print(f"our own cluster: {data}", end="", flush=True)
        for number in range(opts.trials):
            print(f"\n{KINDS[number % len(KINDS)]}: ", end="", flush=True)
            trial(number, opts, url, data, tally)
    return finish(tally, opts.output)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_writer":
        asyncio.run(writer(json.loads(sys.argv[2])))
    else:
        sys.exit(main())
