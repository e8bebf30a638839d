"""The memory part of the benchmark: the peak resident memory of an import
and an export, as the archive grows, and as its lines do.

Three archives are written by hand, each file exactly as an export writes
it. The big one holds about 2 GB of session lines (64 MB with --quick):
sessions of 4,000 entries (a user's question, an assistant's tool call,
the tool's result, the assistant's answer, in turn, of a few to a few
hundred words each: about 600 bytes a line). The small one is its first
sessions, an eighth of its size. The long one is a single session of
2,000 entries alike but for the tools' outputs, of 64 KB each (a file
read, a page fetched): about 33 MB whatever the mode.

Each archive is imported into a new SQLite store, and that store exported
to a new archive; the same with a JSONL store. Each of these runs alone in
a new process (``python -c``: import sessionstore, open the store, do the
work), which reports its own peak resident set, so that neither this
process's memory nor its files count. The baseline, in the same run, is
the same program doing no work: importing sessionstore and opening the
same store (a new one for an import), the floor any such program pays;
beside it, that floor against a bare ``python -c pass``. A second table
sets each figure on the big archive against the same on the small one
(flat is 1.00x), a third each on the long archive against the same on the
small one: what lines of 64 KB cost.

The peak is ``VmHWM`` (Linux; ``ru_maxrss`` elsewhere). Not ``ru_maxrss``
on Linux: a child's starts at the peak of the process that spawned it (the
kernel counts the memory it had at ``exec`` as the child's), so it would
show this benchmark's own size.

Each figure is one process, measured in the first run alone: a peak is no
noisy figure like a time, and the big SQLite import alone takes 11
minutes. Later runs report the same figures (so their spread is none),
and the tables' titles say so. The archives are written once per process
and read only; the stores and exported archives are removed once measured.
The part takes some 17 minutes (45 seconds with --quick): writing the
archives 10 seconds, the big SQLite import 11 minutes (3 MB/s: each line
decoded, its digest chained, its words indexed), its export 4 (reading
every line twice: `integrity`, then the export).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from results import Table

import sessionstore
from sessionstore import Message, MessageEntry, SessionMeta, encode

ENTRIES = 4_000  # entries of each session of the big and small archives
BODIES = 8  # distinct sessions' entries, the sessions taking them in turn
SMALLER = 8  # the small archive is this many times smaller than the big one
LONG_ENTRIES = 2_000  # entries of the long archive's session
LONG_OUTPUT = 64_000  # bytes of each tool output there
KINDS = {"sqlite": "store.db", "jsonl": "store.d"}  # a new store of each kind: its name

VOCABULARY = (
    "the a to of and in for is on that with as it be by this are from at or an not "
    "train booking ticket schedule refund seat window departure arrival platform "
    "function error traceback query database index transaction commit rollback cache "
    "customer account invoice payment order shipping delivery warehouse return policy "
    "summary analysis result report figure table chart trend growth revenue cost budget "
    "please could you check whether we should instead because after before until when"
)
WORDS = VOCABULARY.split()


def _text(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def _message(rng: random.Random, n: int, output: int | None) -> Message:
    """The ``n``th message of a session: question, tool call, result, answer
    (a result of ``output`` bytes, when given)."""
    call = f"call_{n - n % 4:06d}"
    turn = n % 4
    if turn == 0:
        return Message.user(_text(rng, 10, 60))
    if turn == 1:
        arguments = json.dumps({"query": _text(rng, 2, 6), "limit": 20})
        function = {"name": "search_orders", "arguments": arguments}
        return Message(
            role="assistant",
            content=_text(rng, 5, 20),
            tool_calls=[{"id": call, "type": "function", "function": function}],
        )
    if turn == 2:
        result = _text(rng, 30, 150) if output is None else _text(rng, output // 6, output // 6)
        return Message(role="tool", content=result, tool_call_id=call)
    return Message.assistant(_text(rng, 40, 200))


def _body(seed: int, entries: int, output: int | None = None) -> bytes:
    """A session's entry lines, each ending in a newline."""
    rng = random.Random(seed)
    lines = []
    for n in range(entries):
        second = f"{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
        entry = MessageEntry(
            id=f"{seed:02d}-{n:06d}",
            timestamp=f"2026-03-01T{second}.{n:06d}+00:00",
            message=_message(rng, n, output),
        )
        lines.append(encode(entry) + "\n")
    return "".join(lines).encode()


def write_archive(where: Path, size: int, bodies: list[bytes]) -> int:
    """An archive of sessions, ``size`` bytes at least; its session count."""
    sessions = where / "sessions"
    sessions.mkdir(parents=True)
    written = count = 0
    while written < size:
        meta = SessionMeta(id=f"s{count:05d}", created_at="2026-03-01T00:00:00+00:00")
        data = (encode(meta) + "\n").encode() + bodies[count % len(bodies)]
        (sessions / f"{meta.id}.jsonl").write_bytes(data)
        written += len(data)
        count += 1
    return count


def archive_bytes(where: Path) -> int:
    """The bytes of an archive's session files."""
    return sum(path.stat().st_size for path in (where / "sessions").iterdir())


PEAK = """\
import resource, sys
try:
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except OSError:  # no /proc: ru_maxrss (bytes on macOS, KiB elsewhere)
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kib //= 1024 if sys.platform == "darwin" else 1
print(kib * 1024)
"""
"""The end of a new process's program: print its peak resident bytes."""

WORK = """\
import asyncio
import sessionstore
from sessionstore import export_archive, import_archive, open_store

async def main():
    async with open_store({target!r}) as store:
        {work}

asyncio.run(main())
print(sessionstore.__file__)
"""
"""A new process's program: open a store and do some work (or ``pass``),
then print which sessionstore it ran (`PEAK` follows)."""

_ROOT = str(Path(sessionstore.__file__).parents[1])


def run_peak(code: str) -> tuple[list[str], int, float]:
    """What a new process running ``code`` then `PEAK` printed (but its
    peak), its peak resident bytes, and its seconds."""
    # The sessionstore this process runs, whatever is installed.
    path = os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code + PEAK],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"a measured process failed:\n{code}\n{done.stderr}")
    *printed, size = done.stdout.split()
    return printed, int(size), elapsed


def peak(target: Path, work: str = "pass") -> tuple[int, float]:
    """The peak resident bytes, and the seconds, of a new process opening
    ``target`` and running ``work`` (``store`` names the store)."""
    printed, size, elapsed = run_peak(WORK.format(target=str(target), work=work))
    assert printed == [sessionstore.__file__], f"the child ran {printed}"
    return size, elapsed


class _Archives:
    """The big, small and long archives, written once per process."""

    def __init__(self, where: Path, quick: bool) -> None:
        size = 64_000_000 if quick else 2_000_000_000
        start = time.perf_counter()
        bodies = [_body(seed, ENTRIES) for seed in range(BODIES)]
        self.big, self.small, self.long = where / "big", where / "small", where / "long"
        sessions = write_archive(self.big, size, bodies)
        write_archive(self.small, size // SMALLER, bodies)
        write_archive(self.long, 1, [_body(0, LONG_ENTRIES, LONG_OUTPUT)])
        self.seconds = time.perf_counter() - start
        self.sessions = sessions
        self.megabytes = {path: archive_bytes(path) / 1e6 for path in self.all()}

    def all(self) -> tuple[Path, Path, Path]:
        return self.big, self.small, self.long

    def describe(self) -> str:
        big, small, long = (f"{self.megabytes[path]:,.0f} MB" for path in self.all())
        return (
            f"archives of {big} ({self.sessions:,} sessions of {ENTRIES:,} entries), {small} "
            f"(its first eighth) and {long} (tool outputs of {LONG_OUTPUT // 1000} KB), "
            f"written in {self.seconds:.0f} s"
        )


_written: dict[Path, _Archives] = {}
_measured: dict[Path, list[Table]] = {}


def _measure(work: Path, kind: str, archive: Path) -> dict[str, tuple[int, float]]:
    """Peak bytes and seconds of importing ``archive`` into a new store of
    ``kind``, of exporting that store, and of the floor of each (the same
    process doing no work: on a new store, on the full one)."""
    store = work / KINDS[kind]
    out = work / "exported"
    try:
        found = {"new store": peak(store)}
        _remove(work, kind)
        found["import"] = peak(store, f"await import_archive(store, {str(archive)!r})")
        found["full store"] = peak(store)
        found["export"] = peak(store, f"await export_archive(store, {str(out)!r})")
        assert archive_bytes(out) == archive_bytes(archive), "the export differs"
    finally:
        _remove(work, kind)
        shutil.rmtree(out, ignore_errors=True)
    return found


def _remove(work: Path, kind: str) -> None:
    """Remove the store of ``kind`` in ``work`` (a SQLite one with its -wal and -shm)."""
    for path in work.glob(f"{KINDS[kind]}*"):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


async def memory(kept: Path, quick: bool) -> list[Table]:
    """The memory part's tables, measured in the first run (``kept`` is the
    directory the runs share) and the same in every later one."""
    measured = _measured.get(kept)
    if measured is not None:
        print("\n(memory: the figures of the first run)", flush=True)
        return measured
    _measured[kept] = measured = await _measure_all(kept, quick)
    return measured


async def _measure_all(kept: Path, quick: bool) -> list[Table]:
    archives = _written.get(kept)
    if archives is None:
        archives = _written[kept] = _Archives(kept, quick)
        print(f"\n(memory: {archives.describe()})", flush=True)
    big, small, long = (archives.megabytes[path] for path in archives.all())
    peaks = Table(
        "peak resident memory of a new process, vs one that only imports sessionstore "
        "and opens the store (measured in the first run)",
        "the work",
        "the floor",
    )
    grows = Table(
        f"peak resident memory as the archive grows, {big:,.0f} MB vs {small:,.0f} MB "
        "(measured in the first run)",
        f"{big:,.0f} MB",
        f"{small:,.0f} MB",
    )
    lines = Table(
        f"peak resident memory as lines grow, tool outputs of {LONG_OUTPUT // 1000} KB "
        f"({long:,.0f} MB) vs the {small:,.0f} MB archive (measured in the first run)",
        "long lines",
        f"{small:,.0f} MB",
    )
    work = kept / "work"
    work.mkdir(exist_ok=True)
    _, bare, _ = run_peak("")
    for kind in KINDS:
        found = {archive: _measure(work, kind, archive) for archive in archives.all()}
        large, little, longer = (found[archive] for archive in archives.all())
        works = (("import", "new store"), ("export", "full store"))
        for name, floor in works:
            rate = big / large[name][1]
            what = f"{kind}: {name} {big:,.0f} MB ({rate:.0f} MB/s)"
            peaks.add(what, [large[name][0]], [large[floor][0]], unit="bytes")
            grows.add(f"{kind}: {name}", [large[name][0]], [little[name][0]], unit="bytes")
            lines.add(f"{kind}: {name}", [longer[name][0]], [little[name][0]], unit="bytes")
        for name, floor in works:
            what = f"{kind}: {name} {long:,.0f} MB of long lines"
            peaks.add(what, [longer[name][0]], [longer[floor][0]], unit="bytes")
        what = f"the floor ({kind}: import, open) vs python -c pass"
        peaks.add(what, [large["full store"][0]], [bare], unit="bytes")
    return [peaks, grows, lines]
