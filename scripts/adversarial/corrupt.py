"""Corruption campaign: flip bytes, truncate, zero pages in stored files, then read.

Builds one pristine store per backend (SQLite, JSONL; eight sessions with
compactions, two journals) and reads every answer from it: each session's
`load`, `load_context` and `raw_lines`, `list`, `summaries`, each journal's
`read`, and an export. Each trial then copies the pristine store, damages
one file once, and asks the same questions in a child process (a crash or a
hang of the child is one too):

* ``flip``: 1 to 4 bytes XORed at one random place;
* ``flip-line`` (SQLite): one bit of a random entry's line, where the
  digest chain must see it;
* ``flip-column`` (SQLite): one bit of an entry row's ``type`` or
  ``timestamp`` column, which the queries read but no digest covers;
* ``zero``: a 4 KiB page of zeros;
* ``truncate``: the file cut at a random length.

JSONL trials damage a session file (four in five) or a journal file.

Each answer must be the pristine one, or a clean error (`SessionStoreError`;
a `CorruptSessionError` must name the file and line damaged). A wrong answer
given without an error is ``lost`` when `verify_store` (which runs
`integrity()`) finds no fault, and allowed when it does. On SQLite the raw
rows are compared with the pristine ones: every session whose header or an
entry's line changed must be named by `integrity()`, at its first changed
entry (the chain names the first break of each session). On JSONL a change
that leaves every line decoding (a letter flipped inside a string, a file
cut at a line's end, a journal line that now reads as skipped) cannot be
detected, as docs/sql.md says: those are counted in a group of their own.

Usage: python scripts/adversarial/corrupt.py [--trials 60]   (per backend)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import (
    Tally,
    attempt,
    cleanup,
    finish,
    random_entry,
    random_size,
    run_case,
    sha,
    worst,
)

from sessionstore import (
    CorruptSessionError,
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

SCRIPT = Path(__file__).resolve()
SESSIONS = [f"chat-{n}" for n in range(8)]
JOURNALS = ["agent-a", "agent-b"]
PAGE = 4096


# ---------------------------------------------------------------- the pristine stores


async def build(root: Path) -> dict[str, str]:
    """The pristine SQLite and JSONL stores, holding the same lines."""
    rng = random.Random(5)
    sqlite_target = str(root / "pristine.db")
    async with open_store(sqlite_target) as store:
        for sid in SESSIONS:
            await store.create(SessionMeta(id=sid, created_at="2026-01-01T00:00:00Z"))
            prior: list[str] = []
            for n in range(25):
                size = 12_000 if n == 7 else random_size(rng, 3000)  # one line overflows a page
                entry = random_entry(rng, size, f"{sid}-e{n}", prior)
                await store.append(sid, entry)
                if entry.type == "message":
                    prior.append(entry.id)
        for name in JOURNALS:
            journal = store.journal(name)
            await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), Journal())
            for _ in range(30):
                await journal.append(PostWrite(at=Timestamp.now(), id=uuid.uuid4()))
        await export_archive(store, root / "archive")
    async with open_store(str(root / "pristine")) as store:
        await import_archive(store, root / "archive")
    for leftover in root.glob("pristine.db-*"):
        raise SystemExit(f"the pristine database left {leftover.name}: checkpoint failed")
    return {"sqlite": sqlite_target, "jsonl": str(root / "pristine")}


# ---------------------------------------------------------------- the child: ask everything


def digest_of(value) -> str:
    return sha(json.dumps(value, sort_keys=True, default=str))


async def questions(store, export_to: Path) -> dict:
    """Every answer the store gives, each as ``[outcome, digest or error]``."""
    answers = {}

    async def ask(name: str, call, shape=lambda v: v) -> None:
        outcome, value = await attempt(call, 60)
        if outcome == "ok":
            answers[name] = ["ok", digest_of(shape(value))]
        else:
            answers[name] = [outcome, value]

    async def lines(sid: str) -> list[str]:
        return [line async for line in store.raw_lines(sid)]

    await ask("list", store.list(), lambda metas: sorted(encode(m) for m in metas))
    for sid in SESSIONS:
        await ask(f"load {sid}", store.load(sid), lambda es: [encode(e) for e in es])
        await ask(
            f"context {sid}",
            store.load_context(sid),
            lambda ms: [m.model_dump(mode="json") for m in ms],
        )
        await ask(f"raw {sid}", lines(sid))
    await ask(
        "summaries",
        store.summaries(limit=None),
        lambda ss: sorted((encode(s.meta), s.entries, s.last_timestamp, s.compacted) for s in ss),
    )
    for name in JOURNALS:
        await ask(
            f"journal {name}",
            store.journal(name).read(),
            lambda j: (
                [[s.header and encode(s.header), [encode(w) for w in s.writes]] for s in j.sessions]
                + [j.skipped]
            ),
        )

    def tree(report) -> dict[str, str]:
        return {
            str(p.relative_to(export_to)): sha(p.read_bytes())
            for p in sorted(export_to.rglob("*"))
            if p.is_file()
        }

    await ask("export", export_archive(store, export_to), tree)
    return answers


def raw_rows(path: str) -> tuple[dict, dict] | str:
    """The sessions' and entries' rows of a SQLite file, read with sqlite3 alone."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.text_factory = bytes  # a line flipped out of UTF-8 is read all the same
        try:
            heads = {
                row[0]: row[1:] for row in db.execute("SELECT pk, id, header, digest FROM sessions")
            }
            body = {
                (row[0], row[1]): row[2:]
                for row in db.execute(
                    "SELECT session_pk, seq, entry_id, type, timestamp, first_kept_id, line, "
                    "digest FROM entries"
                )
            }
        finally:
            db.close()
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # a flip in the schema's own text too
        return f"{type(exc).__name__}: {exc}"
    return heads, body


async def asked(store, export_to: Path, result: dict) -> None:
    result["answers"] = await questions(store, export_to)
    # Where each session's load failed, and whether it named the place.
    for sid in SESSIONS:
        try:
            await store.load(sid)
        except CorruptSessionError as exc:
            result["errors"][sid] = {"path": exc.path, "line": exc.line, "text": str(exc)}
        except Exception as exc:
            result["errors"][sid] = {"path": None, "line": None, "text": repr(exc)[:300]}
    result["integrity"] = list(await attempt(store.integrity(), 120))
    outcome, report = await attempt(verify_store(store), 120)
    result["verify"] = [outcome, report.faults if outcome == "ok" else report]


ASKED = [
    "list",
    *(f"{q} {sid}" for sid in SESSIONS for q in ("load", "context", "raw")),
    "summaries",
    *(f"journal {name}" for name in JOURNALS),
    "export",
]

COLUMNS = ("entry_id", "type", "timestamp", "first_kept_id", "line", "digest")


async def ask_child(payload: dict) -> dict:
    target = payload["target"]
    export_to = Path(payload["export"])
    result: dict = {"errors": {}}
    opened, store = await attempt(open_store(target), 60)
    if opened != "ok":  # every question gets the same answer: the store does not open
        answers = {name: [opened, store] for name in ASKED}
        result.update(answers=answers, integrity=[opened, store], verify=[opened, store])
        result["errors"] = {sid: {"path": None, "line": None, "text": store} for sid in SESSIONS}
    else:
        async with store:
            await asked(store, export_to, result)
    if payload["backend"] == "sqlite":
        now, then = raw_rows(target), raw_rows(payload["pristine"])
        if isinstance(now, str):
            result["rows"] = now
        else:
            changed = []
            names = {pk: row[0].decode("utf-8", "replace") for pk, row in then[0].items()}
            for pk, row in then[0].items():
                if now[0].get(pk) != row:
                    changed.append([names[pk], "header", 0])
            for key, row in sorted(then[1].items()):
                if now[1].get(key) != row:
                    new = now[1].get(key) or (None,) * len(COLUMNS)
                    columns = [c for c, a, b in zip(COLUMNS, row, new, strict=True) if a != b]
                    changed.append([names[key[0]], ",".join(columns), key[1]])
            result["rows"] = changed
    return result


# ---------------------------------------------------------------- damage


def damage(rng: random.Random, backend: str, root: Path) -> dict:
    """Damage one file of the store at ``root``; say what was done, and where."""
    if backend == "sqlite":
        path = root / "store.db"
        kind = rng.choice(
            ["flip", "flip", "flip-line", "flip-line", "flip-column", "zero", "truncate"]
        )
    else:
        if rng.random() < 0.8:
            path = root / "store" / f"{rng.choice(SESSIONS)}.jsonl"
        else:
            path = root / "store" / "journals" / rng.choice(JOURNALS) / "session_journal.jsonl"
        kind = rng.choice(["flip", "flip", "flip", "zero", "truncate"])
    data = bytearray(path.read_bytes())
    if kind == "flip-line":
        # One bit inside an entry's line: found by the id it holds ("id":"chat-3-e5"),
        # from the line's start to a little past the id.
        needle = f'"id":"{rng.choice(SESSIONS)}-e{rng.randrange(25)}"'.encode()
        at = data.find(needle)
        if at < 0:  # that line runs across pages: any entry's
            at = data.find(b'"id":"chat-')
        begin = max(0, data.rfind(b'{"type":', 0, at))
        offset = rng.randrange(begin, at + len(needle) + 100)
        data[offset] ^= 1 << rng.randrange(8)
        length = 1
    elif kind == "flip-column":
        # One letter of an entry row's type or timestamp column (no line, no digest):
        # the record holds entry_id, type, timestamp side by side.
        for _ in range(50):
            at = data.find(f"{rng.choice(SESSIONS)}-e{rng.randrange(25)}".encode() + b"message")
            if at >= 0:
                break
        offset = data.index(b"message", at) + rng.randrange(len("message") + 27)
        data[offset] ^= 1
        length = 1
    elif kind == "flip":
        offset = rng.randrange(len(data))
        length = rng.randint(1, 4)
        for at in range(offset, min(offset + length, len(data))):
            data[at] ^= rng.randrange(1, 256)
    elif kind == "zero":
        offset = rng.randrange(max(1, len(data) // PAGE)) * PAGE
        length = min(PAGE, len(data) - offset)
        data[offset : offset + length] = bytes(length)
    else:
        offset = rng.randrange(len(data))
        length = len(data) - offset
        del data[offset:]
    path.write_bytes(bytes(data))
    return {"file": str(path.relative_to(root)), "kind": kind, "offset": offset, "length": length}


def damaged_line(original: bytes, offset: int) -> int:
    """The 1-based line of a file holding byte ``offset``."""
    return original.count(b"\n", 0, offset) + 1


# ---------------------------------------------------------------- judging a trial


def judge_trial(backend, what, result, reference, pristine_bytes, tally: Tally) -> None:
    answers = result["answers"]
    faults = result["verify"][1] if result["verify"][0] == "ok" else None
    # verify raising a clean error has not passed either: it saw something wrong.
    flagged = bool(faults) or result["verify"][0] == "clean"
    details = [f"{what['kind']} {what['file']}@{what['offset']}"]
    outcome = "ok"
    for name, (kind, value) in answers.items():
        outcome = worst(outcome, kind)
        if kind in ("crash", "hang"):
            details.append(f"{name}: {value}")
    if result["verify"][0] != "ok":
        outcome = worst(outcome, result["verify"][0])
        details.append(f"verify: {result['verify'][1]}")
    wrong = [n for n, (k, v) in answers.items() if k == "ok" and v != reference[n][1]]
    group = backend
    if wrong:
        if flagged:
            tally.note(backend, "trials with wrong answers that verify flagged")
            outcome = worst(outcome, "clean")
        elif backend == "jsonl" and not result["errors"]:
            group = "jsonl: undetectable (every line decodes)"
            outcome = "lost"
            details.append(f"silently different: {', '.join(wrong[:4])}")
        else:
            outcome = "lost"
            details.append(f"wrong, verify clean: {', '.join(wrong[:4])}")
    # A CorruptSessionError must name the damaged file and line.
    if backend == "jsonl" and what["file"].count("/") == 1:  # store/<id>.jsonl
        sid = what["file"].split("/")[-1][: -len(".jsonl")]
        error = result["errors"].get(sid)
        if error is not None:
            line = damaged_line(pristine_bytes[what["file"]], what["offset"])
            named = error["line"]
            if error["path"] and error["path"].endswith(what["file"].split("/")[-1]):
                tally.note(backend, "load errors naming the damaged file")
            if named == line:
                tally.note(backend, "load errors naming the damaged line")
            elif named is not None and what["kind"] != "truncate":
                tally.note(backend, "load errors naming another line")
                details.append(f"error names line {named}, damage on line {line}")
    if backend == "sqlite":
        rows = result.get("rows")
        if isinstance(rows, str):
            tally.note(backend, "files sqlite3 itself cannot read")
            if not flagged:
                outcome = "lost"
                details.append(f"sqlite3 cannot read it ({rows}) but verify is clean")
        elif rows:
            tally.note(backend, "trials that changed rows")
            first: dict[str, tuple[str, int]] = {}  # each session's first changed line
            for sid, columns, seq in rows:
                if columns == "header" or "line" in columns or "digest" in columns:
                    first.setdefault(sid, (columns, seq))
                else:
                    tally.note(backend, f"rows whose {columns} changed, line and digest intact")
            named = result["integrity"][1] if result["integrity"][0] == "ok" else []
            if result["integrity"][0] != "ok":
                tally.note(backend, "integrity() raised instead of naming the changed rows")
                details.append(f"integrity: {result['integrity'][1]}")
                outcome = worst(outcome, result["integrity"][0])
            for sid, (columns, seq) in first.items():
                mark = f"session {sid!r}: " + ("its header" if seq == 0 else f"entry {seq} ")
                if not any(fault.startswith(mark) for fault in named):
                    outcome = worst(outcome, "clean" if flagged else "lost")
                    details.append(f"integrity does not name {sid} seq {seq} ({columns})")
    tally.add(group, outcome, "; ".join(details)[:700])


# ---------------------------------------------------------------- the campaign


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=60, help="trials per backend (60)")
    parser.add_argument("--backends", default="sqlite,jsonl")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--keep", action="store_true", help="keep the stores of failed trials")
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    print(f"corruption campaign, seed {opts.seed}, {opts.trials} trials per backend")
    tally = Tally(f"corrupt.py: {opts.trials} trials per backend, seed {opts.seed}")
    with tempfile.TemporaryDirectory(prefix="adv-corrupt-") as scratch:
        base = Path(scratch)
        pristine = asyncio.run(build(base))
        for backend in opts.backends.split(","):
            print(f"\n{backend}: ", end="", flush=True)
            source = Path(pristine[backend])
            name = "store.db" if backend == "sqlite" else "store"
            reference_dir = base / f"reference-{backend}"
            reference_dir.mkdir()
            copy(source, reference_dir / name)
            ref = run_case(SCRIPT, payload(backend, reference_dir, name, pristine), timeout=300)
            if ref.result is None or any(k != "ok" for k, _ in ref.result["answers"].values()):
                raise SystemExit(f"the pristine {backend} store does not read back: {ref.tail()}")
            reference = ref.result["answers"]
            if source.is_file():
                pristine_bytes = {name: source.read_bytes()}
            else:
                pristine_bytes = {
                    f"{name}/{p.relative_to(source)}": p.read_bytes()
                    for p in source.rglob("*.jsonl")
                }
            for number in range(opts.trials):
                rng = random.Random(f"{opts.seed}-{backend}-{number}")
                root = base / f"{backend}-{number}"
                root.mkdir()
                copy(source, root / name)
                what = damage(rng, backend, root)
                ran = run_case(SCRIPT, payload(backend, root, name, pristine), timeout=300)
                if ran.status != "ok" or ran.result is None:
                    status = "hang" if ran.status == "hang" else "crash"
                    tally.add(backend, status, f"{what}: child {ran.status}: {ran.tail()}")
                else:
                    judge_trial(backend, what, ran.result, reference, pristine_bytes, tally)
                if opts.keep and tally.examples and ran.status != "ok":
                    shutil.copytree(root, Path(tempfile.mkdtemp(prefix="adv-corrupt-kept-")) / "t")
                cleanup(root)
    return finish(tally, opts.output)


def copy(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest)
    else:
        shutil.copyfile(source, dest)


def payload(backend: str, root: Path, name: str, pristine: dict[str, str]) -> dict:
    return {
        "backend": backend,
        "target": str(root / name),
        "export": str(root / "export"),
        "pristine": pristine["sqlite"],
    }


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_case":
        print("RESULT " + json.dumps(asyncio.run(ask_child(json.loads(sys.argv[2])))), flush=True)
    else:
        sys.exit(main())
