"""What the adversarial campaigns share: outcomes and their tally, cases run in
child processes with a timeout, throwaway PostgreSQL clusters, a small tmpfs,
and random entries.

Every campaign sorts each trial into one outcome (the worst it saw):

* ``ok``: the right answer, no error;
* ``clean``: an error derived from `sessionstore.errors.SessionStoreError`,
  and the data left as the docs promise;
* ``crash``: a traceback, or an exception outside `SessionStoreError`, or a
  process that died of it;
* ``hang``: a call or a process that did not finish within its timeout;
* ``lost``: an append that returned but is missing, history changed, or a
  wrong answer given without an error.

Not part of the package, not run by CI: see README.md beside this file.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

from sessionstore import CompactionEntry, Message, MessageEntry, SessionStoreError

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PYTHON = sys.executable

OUTCOMES = ("ok", "clean", "crash", "hang", "lost")
_RANK = {name: rank for rank, name in enumerate(OUTCOMES)}
MEMORY_LIMIT = 2 << 30  # bytes of address space for each child: /dev/zero stays harmless


def worst(*outcomes: str) -> str:
    """The worst of some outcomes (``lost`` > ``hang`` > ``crash`` > ``clean`` > ``ok``)."""
    return max(outcomes, key=_RANK.__getitem__, default="ok")


class Tally:
    """Outcomes per group (a backend, a kind of input), with examples of each."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.examples: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.notes: dict[str, Counter] = defaultdict(Counter)

    def add(self, group: str, outcome: str, detail: str = "") -> None:
        assert outcome in OUTCOMES, outcome
        self.counts[group][outcome] += 1
        if outcome != "ok" and detail:
            seen = self.examples[group, outcome]
            if detail not in seen and len(seen) < 6:
                seen.append(detail)
        marker = {"ok": ".", "clean": "c", "crash": "X", "hang": "H", "lost": "L"}[outcome]
        print(marker, end="", flush=True)

    def note(self, group: str, what: str, amount: int = 1) -> None:
        """Count something worth saying that is not an outcome (a torn line skipped...)."""
        self.notes[group][what] += amount

    def markdown(self) -> str:
        lines = [
            f"### {self.title}",
            "",
            "| group | tried | ok | clean error | crash | hang | lost |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for group, counts in self.counts.items():
            tried = sum(counts.values())
            cells = [counts[name] for name in OUTCOMES]
            lines.append(f"| {group} | {tried} | " + " | ".join(map(str, cells)) + " |")
        if self.notes:
            lines.append("")
        for group, notes in self.notes.items():
            lines += [f"- {group}: {what}: {count}" for what, count in sorted(notes.items())]
        return "\n".join(lines)

    def report(self) -> str:
        """The table, then examples of every outcome other than ok."""
        parts = [self.markdown(), ""]
        for (group, outcome), details in sorted(self.examples.items()):
            parts.append(f"{group} / {outcome}:")
            parts += [f"  - {d}" for d in details]
        return "\n".join(parts)

    def failed(self) -> bool:
        """Whether any trial crashed, hung or lost data."""
        return any(c["crash"] or c["hang"] or c["lost"] for c in self.counts.values())


class Trial:
    """One trial's outcome so far: the worst seen, and what was seen."""

    def __init__(self) -> None:
        self.outcome = "ok"
        self.details: list[str] = []

    def see(self, outcome: str, detail: str = "") -> None:
        self.outcome = worst(self.outcome, outcome)
        if outcome != "ok" and detail:
            self.details.append(detail)

    def step(self, result: tuple[str, object], what: str) -> bool:
        """Record an `attempt`'s result; whether it went through."""
        outcome, value = result
        if outcome != "ok":
            self.see(outcome, f"{what}: {value}")
        return outcome == "ok"

    def summary(self) -> str:
        return "; ".join(self.details)[:600]


def finish(tally: Tally, output: str | None) -> int:
    """Print the report (and write it to ``output``); exit status 1 on a finding."""
    text = tally.report()
    print("\n\n" + text)
    if output:
        Path(output).write_text(text + "\n")
    return 1 if tally.failed() else 0


# ---------------------------------------------------------------- exceptions


def describe(exc: BaseException) -> str:
    """One line naming an exception: its type and the start of its message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:240]}"


def judge(exc: BaseException) -> str:
    """``clean`` for a `SessionStoreError`, ``crash`` for anything else."""
    return "clean" if isinstance(exc, SessionStoreError) else "crash"


async def attempt(awaitable, timeout: float = 60.0):
    """Await with a timeout: ``("ok", value)``, ``("clean"|"crash", text)`` or ``("hang", ...)``.

    A crash's text ends with the innermost frame, to say where it came from.
    """
    try:
        return "ok", await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        return "hang", f"no answer within {timeout:.0f}s"
    except Exception as exc:
        outcome = judge(exc)
        text = describe(exc)
        if outcome == "crash":
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            text += f" (at {Path(frame.filename).name}:{frame.lineno})"
        return outcome, text


# ---------------------------------------------------------------- child processes


def limit_child() -> None:
    """In a child before exec: bounded memory, its own process group."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.setpgid(0, 0)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a child started by `spawn` and whatever it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def spawn(argv: list[str], *, stdout, stderr, cwd=None, env=None) -> subprocess.Popen:
    """Start a child in a process group of its own, with bounded memory."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        preexec_fn=limit_child,
    )


class Ran:
    """How a child ended: ``status`` is ``ok``, ``crash`` or ``hang``."""

    def __init__(self, status: str, returncode, stdout: str, stderr: str, result) -> None:
        self.status = status
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.result = result

    def tail(self) -> str:
        """The last lines of stderr: where a crash says what it was."""
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-400:]


def run(argv: list[str], *, timeout: float, cwd=None, env=None) -> Ran:
    """Run a child to its end, or kill it (and its group) after ``timeout`` seconds.

    Its last stdout line starting ``RESULT `` is parsed as JSON into ``result``.
    A traceback on stderr, or death by a signal, is a crash.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = spawn(argv, stdout=out, stderr=err, cwd=cwd, env=env)
        try:
            process.wait(timeout)
            status = "ok"
        except subprocess.TimeoutExpired:
            kill_group(process)
            status = "hang"
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    result = None
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            break
    if status == "ok" and ("Traceback (most recent call last)" in stderr or process.returncode < 0):
        status = "crash"
    return Ran(status, process.returncode, stdout, stderr, result)


def run_case(script: Path, payload: dict, *, timeout: float, cwd=None) -> Ran:
    """Run ``script _case PAYLOAD`` (see `case_main`) in a child."""
    return run([PYTHON, str(script), "_case", json.dumps(payload)], timeout=timeout, cwd=cwd)


def case_main(handler) -> None:
    """The child's side of `run_case`: await ``handler(payload)`` and print its result."""
    payload = json.loads(sys.argv[2])
    result = asyncio.run(handler(payload))
    print("RESULT " + json.dumps(result), flush=True)


# ---------------------------------------------------------------- PostgreSQL

PG_SCRIPT = REPO / ".ci" / "postgres"


@contextlib.contextmanager
def pg_cluster(url: str | None, directory: str):
    """A PostgreSQL URL: ``url`` as given, else a throwaway cluster in
    ``directory``, started here and stopped (and removed) at the end.

    Only a cluster started here is ever restarted by a campaign.
    """
    if url:
        yield url, None
        return
    data = Path(directory)
    if data.exists():  # a leftover of an interrupted run: stop it, start afresh
        subprocess.run(["bash", str(PG_SCRIPT), "stop", str(data)], capture_output=True)
        shutil.rmtree(data)
    data.parent.mkdir(parents=True, exist_ok=True)
    started = subprocess.run(
        ["bash", str(PG_SCRIPT), "start", str(data)], capture_output=True, text=True, check=True
    )
    try:
        yield started.stdout.strip(), data
    finally:
        subprocess.run(["bash", str(PG_SCRIPT), "stop", str(data)], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def pg_schema(url: str, schema: str) -> str:
    """A target whose tables live in a new schema of their own: trials never meet."""
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-csearch_path%3D{schema}"


def pg_bin() -> Path:
    """The newest installed PostgreSQL's bin directory."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    if not found:
        raise SystemExit("no PostgreSQL under /usr/lib/postgresql: run .ci/postgres once")
    return found[-1]


# ---------------------------------------------------------------- tmpfs


@contextlib.contextmanager
def tmpfs(size: str):
    """A fresh tmpfs of ``size`` (``"2m"``) mounted on a new directory; root only."""
    mountpoint = Path(tempfile.mkdtemp(prefix="adv-tmpfs-"))
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)], check=True
    )
    try:
        yield mountpoint
    finally:
        for _ in range(5):
            if subprocess.run(["umount", str(mountpoint)], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(["umount", "-l", str(mountpoint)])
        mountpoint.rmdir()


# ---------------------------------------------------------------- data


def text_of(rng: random.Random, size: int) -> str:
    """Random text of about ``size`` characters: ASCII, some accents, some emoji."""
    alphabet = 'abcdefghijklmnopqrstuvwxyz ABCDEFG0123456789.,"\\\n\téàü✓🙂'
    if size <= 64:
        return "".join(rng.choice(alphabet) for _ in range(size))
    chunk = "".join(rng.choice(alphabet) for _ in range(64))
    return (chunk * (size // 64 + 1))[:size]


def random_size(rng: random.Random, most: int = 300_000) -> int:
    """A size from 1 byte to ``most``, most of them small, as chat messages are."""
    return min(most, int(rng.lognormvariate(6, 2.2)) + 1)


def random_entry(rng: random.Random, size: int, entry_id: str, prior: list[str]):
    """A message entry (sometimes with parts or a tool call), or a compaction of ``prior``."""
    stamp = f"2026-01-01T00:00:{rng.randrange(60):02d}.{rng.randrange(10**6):06d}Z"
    if prior and rng.random() < 0.05:
        return CompactionEntry(
            id=entry_id,
            timestamp=stamp,
            summary=text_of(rng, min(size, 2000)),
            first_kept_id=rng.choice(prior),
            tokens_before=rng.randrange(10**6),
        )
    roll = rng.random()
    text = text_of(rng, size)
    if roll < 0.7:
        message = Message(role=rng.choice(["user", "assistant"]), content=text)
    elif roll < 0.85:
        message = Message(role="user", content=[{"type": "text", "text": text}, {"n": 1.5}])
    else:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": text}}
        message = Message(role="assistant", content="", tool_calls=[call])
    return MessageEntry(id=entry_id, timestamp=stamp, message=message)


def sha(data: str | bytes) -> str:
    """A short digest of a line, to compare what was written with what is read."""
    if isinstance(data, str):
        data = data.encode()
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def files_under(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under ``root`` (not following symlinks): its kind and size."""
    found = {}
    for base, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(base, name)
            info = path.lstat()
            kind = "dir" if path.is_dir() and not path.is_symlink() else "other"
            found[str(path.relative_to(root))] = (kind, info.st_size if kind != "dir" else 0)
    return found


def cleanup(path: Path) -> None:
    """Remove a trial's directory, whatever it holds (FIFOs, symlinks)."""
    shutil.rmtree(path, ignore_errors=True)
