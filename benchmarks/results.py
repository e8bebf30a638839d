"""The benchmark's tables, how a figure is timed, and the report it writes
to RESULTS.md.

A run of the whole benchmark fills a list of tables; several runs of it
are combined row by row: the ratio of the median run, and the spread
(lowest and highest ratio) over all of them.
"""

from __future__ import annotations

import os
import platform
import shlex
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


def per_call(call: Callable[[], object], times: int) -> float:
    """Seconds per call, over ``times`` calls in a row."""
    start = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - start) / times


async def aper_call(call: Callable[[], Awaitable[object]], times: int) -> float:
    """Seconds per awaited call, over ``times`` calls in a row."""
    start = time.perf_counter()
    for _ in range(times):
        await call()
    return (time.perf_counter() - start) / times


def per_call_within(call: Callable[[], object], budget: float, most: int) -> float:
    """Seconds per call, over calls in a row until ``budget`` seconds have
    passed (one at least, ``most`` at most): for calls whose cost is not
    known beforehand, or that change what the next one finds."""
    calls, start = 0, time.perf_counter()
    while True:
        call()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget or calls >= most:
            return elapsed / calls


async def aper_call_within(
    call: Callable[[], Awaitable[object]], budget: float, most: int
) -> float:
    """`per_call_within`, for a call to await."""
    calls, start = 0, time.perf_counter()
    while True:
        await call()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget or calls >= most:
            return elapsed / calls


def process_seconds(command: list[str]) -> float:
    """Seconds for a new process to run ``command`` and exit, its output
    piped away (as a script's would be)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


@dataclass(frozen=True)
class Row:
    """One work: our figure, the baseline's, and the spread of the ratio over runs.

    Figures are seconds, or bytes where ``unit`` is ``"bytes"``.
    """

    work: str
    ours: float
    other: float
    low: float
    high: float
    unit: str = "seconds"

    @property
    def ratio(self) -> float:
        return self.ours / self.other


class Table:
    """Rows of (work, ours, other) medians, printed with their ratio."""

    def __init__(self, title: str, ours: str, other: str) -> None:
        self.title, self.ours, self.other = title, ours, other
        self.rows: list[Row] = []

    def add(self, work: str, ours: list[float], other: list[float], unit: str = "seconds") -> None:
        mine, theirs = statistics.median(ours), statistics.median(other)
        self.rows.append(Row(work, mine, theirs, mine / theirs, mine / theirs, unit))

    @classmethod
    def combine(cls, runs: list[Table]) -> Table:
        """The same table from several runs: for each row, the run whose ratio is
        the median (the lower middle one for an even count), with the spread."""
        first = runs[0]
        table = cls(first.title, first.ours, first.other)
        for rows in zip(*(run.rows for run in runs), strict=True):
            ratios = [row.ratio for row in rows]
            middle = rows[ratios.index(statistics.median_low(ratios))]
            low, high = min(ratios), max(ratios)
            table.rows.append(Row(middle.work, middle.ours, middle.other, low, high, middle.unit))
        return table

    def print(self, spread: bool = False) -> None:
        print(f"\n{self.title}")
        head = f"{'work':52} {self.ours:>14} {self.other:>14} {'ratio':>8}"
        print(head + (f"  {'spread':>16}" if spread else ""))
        for row in self.rows:
            ours, other = _figure(row.ours, row.unit), _figure(row.other, row.unit)
            line = f"{row.work:52} {ours:>14} {other:>14} {row.ratio:7.2f}x"
            print(line + (f"  {_spread(row):>16}" if spread else ""))

    def markdown(self, runs: int) -> list[str]:
        lines = [
            f"## {self.title}",
            "",
            f"| work | {self.ours} | {self.other} | ratio | spread of {runs} runs |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for row in self.rows:
            lines.append(
                f"| {row.work} | {_figure(row.ours, row.unit)} | {_figure(row.other, row.unit)} "
                f"| {row.ratio:.2f}x | {_spread(row)} |"
            )
        return [*lines, ""]


def _figure(value: float, unit: str) -> str:
    if unit != "bytes":
        return _time(value)
    return f"{value / 1e6:,.1f} MB" if value >= 1e7 else f"{value:,.0f} B"


def _time(seconds: float) -> str:
    if seconds >= 0.1:
        return f"{seconds * 1e3:,.0f} ms"
    return f"{seconds * 1e6:,.1f} µs"


def _spread(row: Row) -> str:
    return f"{row.low:.2f}x to {row.high:.2f}x"


@dataclass(frozen=True)
class Setting:
    """What was measured, where and how: the head of the report."""

    machine: str
    cpu: str
    date: str
    commit: str
    command: str

    @classmethod
    def read(cls) -> Setting:
        machine = (
            f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
            f"{os.cpu_count()} cpus, {platform.machine()}, {platform.system()} {platform.release()}"
        )
        python = os.path.relpath(sys.executable)
        if python.startswith(".."):
            python = sys.executable
        command = shlex.join([python, *sys.argv])
        date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return cls(machine, _cpu_model(), date, _commit(), command)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    """The commit checked out where this file is, and whether the tree differs."""

    def git(*args: str) -> str:
        where = Path(__file__).parent
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else "unknown"

    head = git("rev-parse", "--short", "HEAD")
    return f"{head} + changes" if git("status", "--porcelain") else head


def write_report(path: Path, setting: Setting, loads: list[float], runs: list[list[Table]]) -> None:
    """RESULTS.md: the setting, then every table combined over the runs."""
    count = len(runs)
    load = ", ".join(f"{one:.2f}" for one in loads)
    lines = [
        "# Benchmark results",
        "",
        "Written by `benchmarks/run.py`, not by hand: run it again to replace this file.",
        "",
        f"- Machine: {setting.machine}",
        f"- CPU: {setting.cpu}",
        f"- Date: {setting.date}",
        f"- Commit: {setting.commit}",
        f"- Command: `{setting.command}`",
        f"- Runs of the whole benchmark: {count} (load average before each: {load})",
        "",
        "A ratio is sessionstore's time over the baseline's, both measured in the",
        "same run; below 1 sessionstore is faster. Each time is the median of",
        f"several rounds within a run. A row shows the median ratio of the {count}",
        "runs, the times of the run it comes from, and the spread: the lowest and",
        f"highest ratio of the {count} runs.",
        "",
    ]
    for tables in zip(*runs, strict=True):
        lines += Table.combine(list(tables)).markdown(count)
    path.write_text("\n".join(lines), encoding="utf-8")
