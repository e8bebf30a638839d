"""What the frameworks' rows share: the plan of a run (sizes, rounds, the
time a row gets), and the prefilled SQLite databases, made once per
process and copied for each use."""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

NAME = "chat"
"""The conversation, on every side."""
BATCH = 5_000
"""Items a prefill writes at a time, through the framework's own call."""
READS = 1_000
"""Calls in a row at most, for a call that changes nothing."""

Figures = tuple[list[float], list[float]]
"""Ours and theirs: a figure a round."""


@dataclass(frozen=True)
class Plan:
    """The sizes of a run, its rounds, and the seconds each side's row gets a round."""

    rounds: int
    budget: float
    # A round of turns runs long enough for the collector's full passes to
    # land in it as they do in an agent's loop: each side's turn allocates a
    # container per item of the history, so every few turns at 10,000 items
    # a full pass (some 140 ms in a process that imported openai-agents)
    # comes; in a 50 ms round it came in one round and not the next.
    turn_budget: float
    agents: tuple[int, ...]  # openai-agents: every row
    longest: int  # openai-agents: get_items(limit=20) alone
    cold: int  # openai-agents: the first call on a new object
    chats: tuple[int, ...]  # LangChain
    turns: tuple[int, int]  # pydantic-ai

    @classmethod
    def of(cls, quick: bool) -> Plan:
        if quick:
            return cls(
                rounds=1,
                budget=0.03,
                turn_budget=0.03,
                agents=(100, 1_000),
                longest=1_000,
                cold=1_000,
                chats=(100, 1_000),
                turns=(100, 1_000),
            )
        return cls(
            rounds=3,
            budget=0.05,
            turn_budget=1.0,
            agents=(100, 1_000, 10_000),
            longest=100_000,
            cold=10_000,
            chats=(100, 1_000, 5_000),
            turns=(100, 10_000),
        )


def turns_at_most(size: int) -> int:
    """Turns in a round: a history of ``size`` grows by at most a tenth."""
    return max(4, size // 20)


def copy_database(source: Path, target: Path) -> Path:
    """A copy of a closed SQLite database (with its write-ahead log, if one is left)."""
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + "-wal"))
    return target


Fill = Callable[[Path, int], Awaitable[None]]
"""Writes a history of some size into a new database at a path."""


class Templates:
    """Prefilled SQLite databases, made once per process (in the directory
    the runs share) and only copied: 100,000 items take some 15 s to write."""

    def __init__(self, kept: Path) -> None:
        self.where = kept / "frameworks-prefilled"
        self.where.mkdir(exist_ok=True)
        self.made: set[Path] = set()

    async def get(self, kind: str, size: int, fill: Fill) -> Path:
        """The database of ``kind`` holding ``size`` items, ``fill`` writing it the first time."""
        path = self.where / f"{kind}-{size}.db"
        if path not in self.made:
            started = time.perf_counter()
            await fill(path, size)
            self.made.add(path)
            took = time.perf_counter() - started
            if took > 2:
                print(f"(frameworks: {kind}, {size:,} items, filled in {took:.0f} s)", flush=True)
        return path

    async def copy(self, kind: str, size: int, fill: Fill, target: Path) -> Path:
        """A copy of that database at ``target``."""
        return copy_database(await self.get(kind, size, fill), target)
