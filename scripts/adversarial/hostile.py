"""Hostile-input campaign: hostile archives, ids, journal names and targets,
through every entry point.

Each case runs in a child process with a timeout (a hang is a finding) and
bounded memory, in a sandbox directory of its own::

    <case>/inner/store      the store (JSONL directory) or store.db (SQLite)
    <case>/inner/archive    an archive to import (never to be written)
    <case>/inner/dest       where exports go
    <case>/inner/outside    files an archive's symlinks point at

The sandbox is listed before and after: a file created or changed anywhere
but the store and ``dest`` (or beside ``inner``, or at an absolute path a
hostile id names) is ``lost``. A call must end in the right answer (``ok``)
or a `SessionStoreError` (``clean``); anything else is a ``crash``, and the
command line must print one ``sessionstore: error:`` line (after one
``refused:`` line per file an import or export would not take), never a
traceback.

Groups:

* ``ids``: hostile session ids and journal names (``../x``, absolute paths,
  NUL, newline, 5000 characters, lookalikes, ``.``, ``..``...) through
  ``create``, ``append``, ``load``, ``load_context``, ``raw_lines``,
  ``journal().append``, and ``export_archive(sessions=..., journals=...)``,
  on JSONL and SQLite;
* ``targets``: hostile `open_store` targets (a FIFO, /dev/zero, a NUL, a
  directory named .db, names too long...);
* ``import``: hostile archives (symlinks out of the archive, FIFOs,
  /dev/zero as a journal, dot files, a 30 MB line, invalid UTF-8, ``[`` x
  100000, duplicate keys, a header naming another id, files that are
  directories) into JSONL, SQLite, and through ``sessionstore import``;
* ``export``: hostile destinations (a FIFO or a symlink out where a file
  goes, ``sessions/`` or a journal's directory symlinked out) by the API and
  ``sessionstore export``;
* ``cli``: ``show``, ``show --json``, ``journal`` and ``export --session``
  with hostile ids;
* ``hardening``: values nested 100,000 deep, symlinks planted at the JSONL
  store's own directories, a malformed 300 MB line, and what the
  openai-agents sessions keep of large items (``hardening.py``).

Usage: python scripts/adversarial/hostile.py [--timeout 8]
       [--groups ids,targets,import,export,cli,hardening]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

from common import PYTHON, Tally, attempt, cleanup, files_under, finish, run, run_case, worst
from hardening import TIMEOUT as HARDENING_TIMEOUT
from hardening import cases as hardening_cases
from hardening import hardening_case

from sessionstore import (
    Journal,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
    Timestamp,
    export_archive,
    import_archive,
    open_store,
)

SCRIPT = Path(__file__).resolve()
ESCAPE = f"/tmp/adv-hostile-escape-{os.getpid()}"  # an absolute path ids name
IDS = {
    "parent": "../x",
    "grandparent": "../../adv-escape",
    "absolute": ESCAPE,
    "NUL": "a\x00b",
    "newline": "a\nb",
    "5000 chars": "x" * 5000,
    "201 bytes": "é" * 100 + "x",
    "fullwidth": "\uff41\uff42\uff43",
    "two-dot leader": "\u2025",
    "fullwidth dots": "\uff0e\uff0e",
    "dot": ".",
    "dotdot": "..",
    "empty": "",
    "space": " ",
    "slash": "a/b",
    "backslash": "a\\b",
    "RTL override": "\u202eabc",
    "lone surrogate": "\ud800",
    "ends .jsonl": "x.jsonl",
    "option-like": "--db",
    "DEL": "a\x7fb",
    "not a string": None,
}
STAMP = "2026-01-01T00:00:00Z"
TIMEOUT = 8  # seconds a call may take in a child before it is a hang
HEADER = '{"version":1,"id":"%s","created_at":"2026-01-01T00:00:00Z"}\n'
ENTRY = '{"type":"message","id":"m1","timestamp":"2026-01-01T00:00:00Z","message":%s}\n'


def entry() -> MessageEntry:
    return MessageEntry(id="m1", timestamp=STAMP, message=Message.user("hi"))


# ---------------------------------------------------------------- the child


async def id_case(inner: Path, backend: str, hostile) -> dict:
    target = str(inner / ("store" if backend == "jsonl" else "store.db"))
    results = {}
    async with open_store(target) as store:

        async def raw() -> list[str]:
            return [line async for line in store.raw_lines(hostile)]

        async def journal() -> None:
            await store.journal(hostile).append(
                SessionHeader(started_at=Timestamp.now(), model="m")
            )

        calls = {
            "create": lambda: store.create(SessionMeta.model_construct(id=hostile, version=1)),
            "append": lambda: store.append(hostile, entry()),
            "append_many": lambda: store.append_many(hostile, [entry()]),
            "load": lambda: store.load(hostile),
            "load_context": lambda: store.load_context(hostile),
            "raw_lines": raw,
            "journal": journal,
            "export sessions=": lambda: export_archive(store, inner / "dest", sessions=[hostile]),
            "export journals=": lambda: export_archive(store, inner / "dest", journals=[hostile]),
        }
        for name, call in calls.items():
            outcome, value = await attempt(_call(call), TIMEOUT)
            results[name] = [outcome, value if outcome != "ok" else repr(value)[:100]]
    return results


async def _call(call):
    return await call()


async def target_case(inner: Path, target: str) -> dict:
    async def use() -> int:
        async with open_store(target) as store:
            await store.create(SessionMeta(id="s", created_at=STAMP))
            return len(await store.list())

    outcome, value = await attempt(use(), TIMEOUT)
    return {"open, create, list": [outcome, value if outcome != "ok" else repr(value)]}


async def import_case(inner: Path, backend: str) -> dict:
    target = str(inner / ("store" if backend == "jsonl" else "store.db"))
    async with open_store(target) as store:
        outcome, value = await attempt(import_archive(store, inner / "archive"), TIMEOUT)
        imported = sorted(m.id for m in await store.list()) if outcome != "hang" else []
    return {"import": [outcome, value if outcome != "ok" else repr(value)[:200]], "ids": imported}


async def export_case(inner: Path) -> dict:
    async with open_store(str(inner / "store")) as store:
        outcome, value = await attempt(export_archive(store, inner / "dest"), TIMEOUT)
        return {"export": [outcome, value if outcome != "ok" else repr(value)[:200]]}


async def child(payload: dict) -> dict:
    inner = Path(payload["inner"])
    if payload["kind"] == "id":
        return await id_case(inner, payload["backend"], payload["id"])
    if payload["kind"] == "target":
        return await target_case(inner, payload["target"])
    if payload["kind"] == "import":
        return await import_case(inner, payload["backend"])
    if payload["kind"] == "hardening":
        return await hardening_case(inner, payload)
    return await export_case(inner)


# ---------------------------------------------------------------- fixtures


def write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def session_file(path: Path, session_id: str, extra: str = "") -> None:
    write(path, HEADER % session_id + ENTRY % '{"role":"user","content":"hi"}' + extra)


def journal_file(path: Path) -> None:
    write(path, '{"line":"session","started_at":"2026-01-01T00:00:00Z","model":"m"}\n')


def archives() -> dict:
    """Hostile archives: name -> what to lay out in ``inner``."""

    def symlink_session(inner: Path) -> None:
        session_file(inner / "outside" / "secret.jsonl", "secret")
        (inner / "archive" / "sessions").mkdir(parents=True)
        (inner / "archive" / "sessions" / "secret.jsonl").symlink_to(
            inner / "outside" / "secret.jsonl"
        )

    def symlink_sessions_dir(inner: Path) -> None:
        session_file(inner / "outside" / "other.jsonl", "other")
        (inner / "archive").mkdir()
        (inner / "archive" / "sessions").symlink_to(inner / "outside")

    def symlink_journal_dir(inner: Path) -> None:
        journal_file(inner / "outside" / "session_journal.jsonl")
        (inner / "archive" / "journals").mkdir(parents=True)
        (inner / "archive" / "journals" / "j").symlink_to(inner / "outside")

    def fifo_session(inner: Path) -> None:
        (inner / "archive" / "sessions").mkdir(parents=True)
        os.mkfifo(inner / "archive" / "sessions" / "f.jsonl")

    def fifo_journal(inner: Path) -> None:
        (inner / "archive" / "journals" / "j").mkdir(parents=True)
        os.mkfifo(inner / "archive" / "journals" / "j" / "session_journal.jsonl")

    def dev_zero_journal(inner: Path) -> None:
        (inner / "archive" / "journals" / "j").mkdir(parents=True)
        (inner / "archive" / "journals" / "j" / "session_journal.jsonl").symlink_to("/dev/zero")

    def dev_zero_session(inner: Path) -> None:
        (inner / "archive" / "sessions").mkdir(parents=True)
        (inner / "archive" / "sessions" / "z.jsonl").symlink_to("/dev/zero")

    def dot_files(inner: Path) -> None:
        session_file(inner / "archive" / "sessions" / ".hidden.jsonl", ".hidden")
        journal_file(inner / "archive" / "journals" / ".dot" / "session_journal.jsonl")
        journal_file(inner / "archive" / "journals" / ".." / "session_journal.jsonl")

    def huge_line(inner: Path) -> None:
        text = json.dumps({"role": "user", "content": "x" * 30_000_000})
        session_file(inner / "archive" / "sessions" / "big.jsonl", "big", ENTRY % text)

    def huge_journal_line(inner: Path) -> None:
        write(inner / "archive" / "journals" / "j" / "session_journal.jsonl", b"y" * 20_000_000)

    def invalid_utf8(inner: Path) -> None:
        write(inner / "archive" / "sessions" / "u.jsonl", (HEADER % "u").encode() + b"\xff\xfe\n")
        write(inner / "archive" / "journals" / "j" / "session_journal.jsonl", b"\xff\n")

    def deep_nesting(inner: Path) -> None:
        deep = "[" * 100_000 + "]" * 100_000
        session_file(inner / "archive" / "sessions" / "d.jsonl", "d", ENTRY % deep)
        write(inner / "archive" / "sessions" / "h.jsonl", '{"id":"h","x":' + deep + "}\n")
        write(inner / "archive" / "journals" / "j" / "session_journal.jsonl", deep + "\n")

    def duplicate_keys(inner: Path) -> None:
        write(
            inner / "archive" / "sessions" / "a.jsonl",
            '{"version":1,"id":"a","id":"b"}\n',
        )
        write(
            inner / "archive" / "sessions" / "c.jsonl",
            HEADER % "c" + '{"type":"message","type":"compaction","id":"m1","timestamp":"t",'
            '"message":{"role":"user","content":"hi"}}\n',
        )

    def wrong_header(inner: Path) -> None:
        session_file(inner / "archive" / "sessions" / "mine.jsonl", "theirs")
        session_file(inner / "archive" / "sessions" / "x.jsonl", "../x")

    def directories(inner: Path) -> None:
        (inner / "archive" / "sessions" / "d.jsonl").mkdir(parents=True)
        (inner / "archive" / "journals" / "j" / "session_journal.jsonl").mkdir(parents=True)

    def odd_names(inner: Path) -> None:
        session_file(inner / "archive" / "sessions" / "a\nb.jsonl", "a\nb")
        session_file(inner / "archive" / "sessions" / ("é" * 101 + ".jsonl"), "é" * 101)
        session_file(inner / "archive" / "sessions" / "..jsonl", ".")

    def empty_and_torn(inner: Path) -> None:
        write(inner / "archive" / "sessions" / "e.jsonl", b"")
        write(inner / "archive" / "sessions" / "n.jsonl", b"\n")
        write(inner / "archive" / "sessions" / "t.jsonl", (HEADER % "t")[:-5])
        write(inner / "archive" / "sessions" / "z.jsonl", (HEADER % "z").encode() + b"\0" * 100)

    def archive_is_a_file(inner: Path) -> None:
        write(inner / "archive", "not a directory")

    return {
        "session symlinked out of the archive": symlink_session,
        "sessions/ symlinked out": symlink_sessions_dir,
        "journal dir symlinked out": symlink_journal_dir,
        "FIFO as a session": fifo_session,
        "FIFO as a journal": fifo_journal,
        "/dev/zero as a journal": dev_zero_journal,
        "/dev/zero as a session": dev_zero_session,
        "dot files": dot_files,
        "30 MB line": huge_line,
        "20 MB journal line": huge_journal_line,
        "invalid UTF-8": invalid_utf8,
        "[ x 100000": deep_nesting,
        "duplicate keys": duplicate_keys,
        "header names another id": wrong_header,
        "directories where files go": directories,
        "odd file names": odd_names,
        "empty, torn, NUL files": empty_and_torn,
        "archive is a file": archive_is_a_file,
    }


def destinations() -> dict:
    """Hostile export destinations; the store holds session s1 and journal j1."""

    def fifo_session(inner: Path) -> None:
        (inner / "dest" / "sessions").mkdir(parents=True)
        os.mkfifo(inner / "dest" / "sessions" / "s1.jsonl")

    def fifo_journal(inner: Path) -> None:
        (inner / "dest" / "journals" / "j1").mkdir(parents=True)
        os.mkfifo(inner / "dest" / "journals" / "j1" / "session_journal.jsonl")

    def symlink_file(inner: Path) -> None:
        write(inner / "outside" / "victim.jsonl", "precious\n")
        (inner / "dest" / "sessions").mkdir(parents=True)
        (inner / "dest" / "sessions" / "s1.jsonl").symlink_to(inner / "outside" / "victim.jsonl")

    def symlink_sessions(inner: Path) -> None:
        (inner / "outside").mkdir()
        (inner / "dest").mkdir()
        (inner / "dest" / "sessions").symlink_to(inner / "outside")

    def symlink_journal(inner: Path) -> None:
        (inner / "outside").mkdir()
        (inner / "dest" / "journals").mkdir(parents=True)
        (inner / "dest" / "journals" / "j1").symlink_to(inner / "outside")

    def dev_zero(inner: Path) -> None:
        (inner / "dest" / "sessions").mkdir(parents=True)
        (inner / "dest" / "sessions" / "s1.jsonl").symlink_to("/dev/zero")

    def directory(inner: Path) -> None:
        (inner / "dest" / "sessions" / "s1.jsonl").mkdir(parents=True)

    def dest_is_a_file(inner: Path) -> None:
        write(inner / "dest", "not a directory")

    return {
        "FIFO where a session goes": fifo_session,
        "FIFO where a journal goes": fifo_journal,
        "session file symlinked out": symlink_file,
        "sessions/ symlinked out": symlink_sessions,
        "journal dir symlinked out": symlink_journal,
        "/dev/zero where a session goes": dev_zero,
        "directory where a session goes": directory,
        "destination is a file": dest_is_a_file,
    }


def targets(inner: Path) -> dict:
    os.mkfifo(inner / "fifo.db")
    (inner / "dir.db").mkdir()
    (inner / "zero.db").symlink_to("/dev/zero")
    write(inner / "garbage.db", os.urandom(8192))
    return {
        "empty": "",
        "spaces": "   ",
        "jsonl relative": "jsonl://relative",
        "jsonl:///dev/null": "jsonl:///dev/null",
        "/dev/null": "/dev/null",
        "sqlite://": "sqlite://",
        "sqlite :memory:": "sqlite:///:memory:",
        "missing directory": f"sqlite:///{inner}/missing/x.db",
        "postgresql, no server": "postgresql://u@/db?host=/nonexistent-socket-dir",
        "memory://x": "memory://x",
        "NUL in path": f"{inner}/a\x00b.db",
        "300-byte name .db": f"{inner}/{'x' * 300}.db",
        "300-byte name dir": f"{inner}/{'y' * 300}",
        "unknown scheme": "http://localhost/x",
        "FIFO as database": f"{inner}/fifo.db",
        "directory as database": f"{inner}/dir.db",
        "/dev/zero as database": f"{inner}/zero.db",
        "random bytes as database": f"{inner}/garbage.db",
    }


async def export_store(inner: Path) -> None:
    async with open_store(str(inner / "store")) as store:
        await store.create(SessionMeta(id="s1", created_at=STAMP))
        await store.append("s1", entry())
        journal = store.journal("j1")
        await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), Journal())
        await journal.append(PostWrite(at=Timestamp.now(), id=uuid.uuid4()))


# ---------------------------------------------------------------- the campaign


class Sandbox:
    """A case's directory, listed before and after, to catch writes out of place."""

    ALLOWED = ("inner/store", "inner/dest", "inner/store.db")

    def __init__(self) -> None:
        self.case = Path(tempfile.mkdtemp(prefix="adv-hostile-"))
        self.inner = self.case / "inner"
        self.inner.mkdir()
        self.before: dict = {}

    def snapshot(self) -> None:
        self.before = files_under(self.case)

    def strays(self) -> list[str]:
        after = files_under(self.case)
        found = [
            name
            for name, info in after.items()
            if self.before.get(name) != info
            and not name.startswith(self.ALLOWED)
            and info[0] != "dir"
        ]
        found += [  # removed, as an unlink through a planted link would
            f"{name} (removed)"
            for name, info in self.before.items()
            if name not in after and not name.startswith(self.ALLOWED) and info[0] != "dir"
        ]
        found += [ESCAPE] if os.path.lexists(ESCAPE) else []
        found += ["/tmp/adv-escape"] if os.path.lexists("/tmp/adv-escape") else []
        return found


def judge(tally: Tally, group: str, name: str, ran, sandbox: Sandbox, cli: bool = False) -> None:
    """Record one case: the child's answers, how it ended, and what it wrote."""
    strays = sandbox.strays()
    detail = f"{name}"
    if ran.status != "ok":
        outcome = ran.status
        detail += f": child {ran.status} {ran.tail()}"
    elif cli:
        if "Traceback" in ran.stderr:
            outcome = "crash"
            detail += f": traceback: {ran.tail()}"
        elif ran.returncode == 0:
            outcome = "ok"
        else:
            lines = [line for line in ran.stderr.splitlines() if line.strip()]
            # One error line, after the command line's report: a "refused:"
            # line per file import or export would not take, "warning:" lines.
            one = (
                bool(lines)
                and lines[-1].startswith("sessionstore: error:")
                and all(line.startswith(("refused: ", "warning: ")) for line in lines[:-1])
            )
            outcome = "clean" if one or ran.returncode == 2 else "crash"
            detail += f": exit {ran.returncode}: {' | '.join(lines)[:300]}"
    else:
        outcome = "ok"
        if "note" in ran.result:
            tally.note(group, ran.result.pop("note"))
        for call, answer in ran.result.items():
            if call != "ids" and answer[0] != "ok":
                outcome = worst(outcome, answer[0])
                if answer[0] != "clean":
                    detail += f"; {call}: {answer[0]} {answer[1]}"
        if "ids" in ran.result and any(i in ("secret", "other") for i in ran.result["ids"]):
            detail += f"; imported from outside the archive: {ran.result['ids']}"
            outcome = "lost"
    if strays:
        outcome = "lost"
        detail += f"; wrote outside the store: {strays[:3]}"
    tally.add(group, outcome, detail)


def cli(argv: list[str], inner: Path, timeout: float):
    return run([PYTHON, "-m", "sessionstore", *argv], timeout=timeout, cwd=inner)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds before a hang (8)")
    parser.add_argument("--groups", default="ids,targets,import,export,cli,hardening")
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    groups = opts.groups.split(",")
    tally = Tally(f"hostile.py: timeout {opts.timeout:.0f} s per case")
    print("hostile-input campaign")

    def case(
        group: str,
        name: str,
        lay_out,
        payload: dict | None,
        argv: list[str] | None = None,
        timeout: float | None = None,
    ):
        sandbox = Sandbox()
        try:
            extra = lay_out(sandbox.inner) or {}  # a target known once laid out
            sandbox.snapshot()
            if argv is not None:
                ran = cli(
                    [a.replace("INNER", str(sandbox.inner)) for a in argv],
                    sandbox.inner,
                    opts.timeout,
                )
            else:
                payload = {**payload, **extra, "inner": str(sandbox.inner)}
                # In the sandbox: a target such as "" writes where the child stands.
                wait = (timeout or opts.timeout) + 5
                ran = run_case(SCRIPT, payload, timeout=wait, cwd=sandbox.inner)
            judge(tally, group, name, ran, sandbox, cli=argv is not None)
        finally:
            cleanup(sandbox.case)

    def nothing(inner: Path) -> None:
        pass

    if "ids" in groups:
        print("\nids: ", end="", flush=True)
        for backend in ("jsonl", "sqlite"):
            for name, hostile in IDS.items():
                case(
                    f"ids ({backend})",
                    name,
                    nothing,
                    {"kind": "id", "backend": backend, "id": hostile},
                )
    if "targets" in groups:
        print("\ntargets: ", end="", flush=True)
        probe = Sandbox()
        names = list(targets(probe.inner))
        cleanup(probe.case)
        for name in names:
            case(
                "targets",
                name,
                lambda inner, name=name: {"target": targets(inner)[name]},
                {"kind": "target"},
            )
    if "import" in groups:
        print("\nimport: ", end="", flush=True)
        for name, lay_out in archives().items():
            for backend in ("jsonl", "sqlite"):
                case(f"import ({backend})", name, lay_out, {"kind": "import", "backend": backend})
            case(
                "import (CLI)",
                name,
                lay_out,
                None,
                ["--db", "INNER/store", "import", "INNER/archive"],
            )
    if "export" in groups:
        print("\nexport: ", end="", flush=True)
        for name, lay_out in destinations().items():

            def prepared(inner: Path, lay_out=lay_out) -> None:
                asyncio.run(export_store(inner))
                lay_out(inner)

            case("export (API)", name, prepared, {"kind": "export"})
            case(
                "export (CLI)",
                name,
                prepared,
                None,
                ["--db", "INNER/store", "export", "INNER/dest"],
            )
    if "cli" in groups:
        print("\ncli: ", end="", flush=True)
        for name, hostile in IDS.items():
            if hostile is None or "\x00" in hostile or "\ud800" in hostile:
                continue  # an argv cannot carry these
            for argv in (
                ["show", hostile],
                ["show", hostile, "--json"],
                ["journal", hostile],
                ["export", "INNER/dest", "--session", hostile],
            ):
                case(
                    "cli",
                    f"{' '.join(argv[:1] + argv[2:])} {name}",
                    lambda inner: asyncio.run(export_store(inner)),
                    None,
                    ["--db", "INNER/store", *argv],
                )
    if "hardening" in groups:
        print("\nhardening: ", end="", flush=True)
        for name, (group, lay_out, payload) in hardening_cases().items():
            case(
                group,
                name,
                lay_out or nothing,
                {"kind": "hardening", **payload},
                timeout=HARDENING_TIMEOUT,
            )
    return finish(tally, opts.output)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_case":
        print("RESULT " + json.dumps(asyncio.run(child(json.loads(sys.argv[2])))), flush=True)
    else:
        sys.exit(main())
