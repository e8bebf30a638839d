"""Archive campaign: exports racing erasures in another process, and families
whose ``parent_session`` links form a cycle, on every backend.

Groups:

* ``export-erase (jsonl|sqlite|postgresql)``: a store of 15 titled sessions
  (entries up to 40 KB); one child exports everything while another erases
  5 of them, one after another, starting at a random moment. The export
  must succeed (``ok``); an `ArchiveError` or another `SessionStoreError`
  is ``clean`` (the export failed whole). Then every session not erased is
  in the archive byte for byte with its titles, and an erased one is either
  there whole with its titles (read before its erase) or absent (erased
  before the listing, or left out and named in the report's warnings);
  anything else (a partial file, a session without its titles or titles
  without their session, one not erased missing or named as left out) is
  ``lost``.
* ``cycles import (jsonl|sqlite|postgresql|CLI)``: archives whose sessions
  name each other as parents (itself, two, three, a thousand; with
  sessions hanging below; closing a cycle with the store). The import must
  refuse each session on a cycle (``clean``, naming each) and import the
  rest; a cycle member imported, or a session off the cycle refused, is
  ``lost``.
* ``cycles retire (jsonl|sqlite|postgresql)``: such families put in a store
  by `import_session` (a JSONL file by hand for a session naming itself),
  then retired by name: every session named is then retired (gone from the
  store, in the archive) or named in ``skipped``; a report that is ``ok``
  while a chosen session stays unreported is ``lost``.

PostgreSQL runs when ``--pg-url`` (or ``SESSIONSTORE_PG_URL``) names a
server; each trial uses a schema of its own, dropped at the end.

Usage: python scripts/adversarial/archives.py [--trials 15] [--groups export-erase,cycles]
    [--backends jsonl,sqlite,postgresql] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import PYTHON, Tally, attempt, cleanup, finish, pg_schema, run, run_case

from sessionstore import (
    JsonlStore,
    Message,
    MessageEntry,
    SessionMeta,
    export_archive,
    import_archive,
    open_store,
    retire,
)

SCRIPT = Path(__file__).resolve()
STAMP = "2020-01-01T00:00:00Z"
SESSIONS = 15
ERASED = 5
TIMEOUT = 120.0


# ---------------------------------------------------------------- the children


async def export_child(payload: dict) -> dict:
    async with open_store(payload["target"]) as store:
        outcome, value = await attempt(export_archive(store, payload["dest"]), TIMEOUT)
        if outcome == "ok":
            return {"outcome": "ok", "warnings": [w.file for w in value.warnings]}
        return {"outcome": outcome, "error": str(value)[:400]}


async def erase_child(payload: dict) -> dict:
    await asyncio.sleep(payload["delay"])
    erased = []
    async with open_store(payload["target"]) as store:
        for session_id in payload["victims"]:
            await store.erase(session_id, reason="erased while exporting")
            erased.append(session_id)
            await asyncio.sleep(payload["gap"])
    return {"erased": erased}


async def child(payload: dict) -> dict:
    if payload["kind"] == "export":
        return await export_child(payload)
    return await erase_child(payload)


# ---------------------------------------------------------------- export-erase


def new_target(backend: str, root: Path, pg_url: str | None, schemas: list[str]) -> str:
    if backend == "jsonl":
        return str(root / "store")
    if backend == "sqlite":
        return f"sqlite:///{root / 'store.db'}"
    assert pg_url is not None
    schema = f"adv_archives_{os.getpid()}_{len(schemas)}_{int(time.time() * 1000) % 10**8}"
    schemas.append(schema)
    return pg_schema(pg_url, schema)


def drop_schemas(pg_url: str | None, schemas: list[str]) -> None:
    if not pg_url or not schemas:
        return
    import psycopg

    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        conn.autocommit = True
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    schemas.clear()


async def fill(target: str, rng: random.Random) -> dict[str, tuple[list[str], bool]]:
    """The sessions, each titled: each one's lines, and whether it has titles."""
    stored = {}
    async with open_store(target) as store:
        for n in range(SESSIONS):
            session_id = f"s{n:02}"
            await store.create(SessionMeta(id=session_id, created_at=STAMP))
            entries = [
                MessageEntry(
                    id=f"{session_id}-{k}",
                    timestamp=STAMP,
                    message=Message.user("x" * rng.randrange(1, 40_000)),
                )
                for k in range(rng.randrange(5, 30))
            ]
            await store.append_many(session_id, entries)
            await store.set_title(session_id, f"session {n}")
        for session_id in [f"s{n:02}" for n in range(SESSIONS)]:
            lines = [line async for line in store.raw_lines(session_id)]
            stored[session_id] = (lines, bool(await store.titles(session_id)))
    return stored


def check_archive(
    dest: Path, stored: dict, erased: list[str], warned: list[str]
) -> tuple[str, str]:
    """Whether the archive holds what the promise says, and what is wrong."""
    wrong = []
    warned_ids = {Path(file).name[: -len(".jsonl")] for file in warned}
    for session_id, (lines, titles) in stored.items():
        path = dest / "sessions" / f"{session_id}.jsonl"
        titles_path = dest / "titles" / f"{session_id}.jsonl"
        if not path.exists():  # erased before the listing, or left out and named
            if session_id not in erased:
                wrong.append(f"{session_id} missing, not erased")
            if titles_path.exists():
                wrong.append(f"{session_id}: titles without their session")
            continue
        if path.read_text().splitlines() != lines:
            wrong.append(f"{session_id}: differs from the store's bytes")
        if session_id in warned_ids:
            wrong.append(f"{session_id}: in the archive, yet reported left out")
        if bool(titles) != titles_path.exists():
            wrong.append(f"{session_id}: titles {'missing' if titles else 'extra'}")
    for session_id in sorted(warned_ids - set(erased)):
        wrong.append(f"{session_id}: reported left out, not erased")
    return ("lost", "; ".join(wrong)[:500]) if wrong else ("ok", "")


def export_erase_trial(
    tally: Tally, backend: str, rng: random.Random, pg_url: str | None, timeout: float
) -> None:
    root = Path(tempfile.mkdtemp(prefix="adv-archives-"))
    schemas: list[str] = []
    group = f"export-erase ({backend})"
    try:
        target = new_target(backend, root, pg_url, schemas)
        stored = asyncio.run(fill(target, rng))
        victims = rng.sample(sorted(stored), ERASED)
        export = {"kind": "export", "target": target, "dest": str(root / "archive")}
        erase = {
            "kind": "erase",
            "target": target,
            "victims": victims,
            "delay": rng.uniform(0.0, 0.6),
            "gap": rng.uniform(0.0, 0.05),
        }
        with ThreadPoolExecutor(2) as pool:
            exporting = pool.submit(run_case, SCRIPT, export, timeout=timeout)
            erasing = pool.submit(run_case, SCRIPT, erase, timeout=timeout)
            exported, eraser = exporting.result(), erasing.result()
        if exported.status != "ok" or exported.result is None:
            tally.add(
                group,
                exported.status if exported.status != "ok" else "crash",
                f"export child: {exported.tail()}",
            )
            return
        if eraser.status != "ok" or eraser.result is None:
            tally.add(group, "crash", f"erase child: {eraser.tail()}")
            return
        erased = eraser.result["erased"]
        answer = exported.result
        if answer["outcome"] != "ok":
            tally.add(group, answer["outcome"], f"export failed: {answer['error']}")
            return
        outcome, detail = check_archive(root / "archive", stored, erased, answer["warnings"])
        tally.note(group, "sessions left out, erased", len(answer["warnings"]))
        tally.add(group, outcome, detail)
    finally:
        drop_schemas(pg_url, schemas)
        cleanup(root)


# ---------------------------------------------------------------- cycles

ENTRY = (
    '{"type":"message","id":"m1","timestamp":"2020-01-01T00:00:00Z",'
    '"message":{"role":"user","content":"hello"}}'
)


def header(session_id: str, parent: str | None) -> str:
    link = "" if parent is None else f',"parent_session":"{parent}"'
    return f'{{"id":"{session_id}","version":1{link},"created_at":"{STAMP}"}}'


def families() -> dict[str, tuple[dict[str, str | None], set[str], dict[str, str | None]]]:
    """Each case: the archive's sessions and parents, the cycle's members, and
    what the store holds first (sessions and parents, made by import)."""
    long = {f"c{n:04}": f"c{(n + 1) % 1000:04}" for n in range(1000)}
    return {
        "itself": ({"a": "a", "b": None}, {"a"}, {}),
        "two": ({"a": "b", "b": "a", "c": None}, {"a", "b"}, {}),
        "three": ({"a": "b", "b": "c", "c": "a"}, {"a", "b", "c"}, {}),
        "with forks below": (
            {"a": "b", "b": "a", "x": "a", "y": "x", "z": "b"},
            {"a", "b"},
            {},
        ),
        "a thousand": ({**long, "below": "c0000"}, set(long), {}),
        "closed by the store": ({"a": "b"}, {"a"}, {"b": "a"}),
        "two cycles": (
            {"a": "b", "b": "a", "c": "d", "d": "c", "e": "a"},
            {"a", "b", "c", "d"},
            {},
        ),
    }


async def import_cycle(target: str, root: Path, sessions, members, first) -> tuple[str, str]:
    archive = root / "archive" / "sessions"
    archive.mkdir(parents=True)
    for session_id, parent in sessions.items():
        (archive / f"{session_id}.jsonl").write_text(
            header(session_id, parent) + "\n" + ENTRY + "\n"
        )
    async with open_store(target) as store:
        for session_id, parent in first.items():
            await store.import_session(header(session_id, parent), _none())
        outcome, value = await attempt(import_archive(store, root / "archive"), TIMEOUT)
        held = {meta.id for meta in await store.list()}
    expected = (set(sessions) - members) | set(first)
    if outcome == "ok":
        return "lost", f"imported without a refusal: {sorted(held)[:6]}"
    if outcome != "clean":
        return outcome, str(value)
    if held != expected:
        wrong = sorted(held ^ expected)[:6]
        return "lost", f"store holds {len(held)}, expected {len(expected)}: {wrong}"
    return "clean", f"{len(members)} refused, the {len(expected)} others held"


async def _none():
    return
    yield


async def retire_cycle(target: str, root: Path, sessions, members, first) -> tuple[str, str]:
    named = sorted(sessions)
    async with open_store(target) as store:
        for session_id, parent in sessions.items():
            if parent == session_id:  # import refuses it: a JSONL file by hand
                if not isinstance(store, JsonlStore):
                    named.remove(session_id)
                    continue
                store.directory.mkdir(parents=True, exist_ok=True)
                path = store.directory / f"{session_id}.jsonl"
                path.write_text(header(session_id, parent) + "\n")
                continue
            await store.import_session(header(session_id, parent), _none())
        outcome, value = await attempt(retire(store, root / "archive", sessions=named), TIMEOUT)
        held = {meta.id for meta in await store.list()}
    if outcome != "ok":
        return outcome, str(value)
    report = value
    told = set(report.retired) | {issue.session_id for issue in report.skipped}
    unreported = sorted((held & set(named)) - told)
    if unreported:
        return "lost", f"still in the store, unreported (ok={report.ok}): {unreported[:6]}"
    if held & set(report.retired):
        return "lost", f"reported retired, still held: {sorted(held & set(report.retired))[:6]}"
    return "ok", ""


def cycle_trials(tally: Tally, backends: list[str], pg_url: str | None, timeout: float) -> None:
    for name, (sessions, members, first) in families().items():
        for backend in backends:
            for what, trial in (("import", import_cycle), ("retire", retire_cycle)):
                if what == "retire" and first:
                    continue
                root = Path(tempfile.mkdtemp(prefix="adv-archives-"))
                schemas: list[str] = []
                try:
                    target = new_target(backend, root, pg_url, schemas)
                    work = trial(target, root, sessions, members, first)
                    outcome, detail = asyncio.run(asyncio.wait_for(work, timeout))
                except TimeoutError:
                    outcome, detail = "hang", f"no answer within {timeout:.0f}s"
                finally:
                    drop_schemas(pg_url, schemas)
                    cleanup(root)
                tally.add(f"cycles {what} ({backend})", outcome, f"{name}: {detail}")
        root = Path(tempfile.mkdtemp(prefix="adv-archives-"))
        try:
            if not first:
                (root / "archive" / "sessions").mkdir(parents=True)
                for session_id, parent in sessions.items():
                    line = header(session_id, parent) + "\n" + ENTRY + "\n"
                    (root / "archive" / "sessions" / f"{session_id}.jsonl").write_text(line)
                argv = ["--db", str(root / "store"), "import", str(root / "archive")]
                ran = run([PYTHON, "-m", "sessionstore", *argv], timeout=timeout, cwd=root)
                lines = [line for line in ran.stderr.splitlines() if line.strip()]
                refused = sum(line.startswith("refused: ") for line in lines)
                if ran.status != "ok" or "Traceback" in ran.stderr:
                    tally.add("cycles import (CLI)", "crash", f"{name}: {ran.tail()}")
                elif ran.returncode == 1 and refused == len(members):
                    tally.add("cycles import (CLI)", "clean")
                else:
                    detail = f"{name}: exit {ran.returncode}, {refused} refused of {len(members)}"
                    tally.add("cycles import (CLI)", "lost", detail)
        finally:
            cleanup(root)


# ---------------------------------------------------------------- the campaign


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=15, help="export-erase trials per backend")
    parser.add_argument("--groups", default="export-erase,cycles")
    parser.add_argument("--pg-url", default=os.environ.get("SESSIONSTORE_PG_URL"))
    parser.add_argument("--backends", default="jsonl,sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    backends = [b for b in opts.backends.split(",") if b != "postgresql" or opts.pg_url]
    tally = Tally(f"archives.py: {opts.trials} export-erase trials per backend, seed {seed}")
    print(f"archive campaign (seed {seed}); backends: {', '.join(backends)}")
    groups = opts.groups.split(",")
    if "export-erase" in groups:
        for backend in backends:
            print(f"\nexport-erase ({backend}): ", end="", flush=True)
            for _ in range(opts.trials):
                export_erase_trial(tally, backend, rng, opts.pg_url, opts.timeout)
    if "cycles" in groups:
        print("\ncycles: ", end="", flush=True)
        cycle_trials(tally, backends, opts.pg_url, opts.timeout)
    return finish(tally, opts.output)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_case":
        print("RESULT " + json.dumps(asyncio.run(child(json.loads(sys.argv[2])))), flush=True)
    else:
        sys.exit(main())
