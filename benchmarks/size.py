"""The size part of the benchmark: bytes per turn on SQLite, ours against
openai-agents' ``SQLiteSession``.

The same conversation goes into each, a turn at a time: a user's message
and the assistant's answer (texts of about 250 bytes, from a vocabulary
of common words and rarer ones, as prose and code mix them), through
`StoreSession.add_items` into a new SQLite store and through
``SQLiteSession.add_items`` into a new file of its own, at 100 and 1,000
turns. Each file is measured once its write-ahead log is checkpointed
into it (``wal_checkpoint(TRUNCATE)``: the WAL then holds nothing), so
like is compared with like: the database file, whose bytes are its pages.

Run alone, it also prints what takes the space, table by table and index
by index (SQLite's ``dbstat``)::

    .venv/bin/python benchmarks/size.py
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from results import Table

from sessionstore import SqlStore
from sessionstore.integrations.openai_agents import StoreSession

if TYPE_CHECKING:
    from agents import TResponseInputItem

TURNS = (100, 1_000)

_COMMON = """
the of and to in is that it for on with as be this by are or at from an not we you
agent model tool call result file error request response user assistant session
message token context history search index database table query row column value
number string list function return test case run build deploy server client time
please could would should will can may might must need want know think see look
find get make write read open close start stop send update change delete create add
"""


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Rarer words: names, identifiers, the words of one project."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(4, 11))) for _ in range(size)]


def texts(count: int, seed: int = 46) -> list[str]:
    """``count`` texts of about 250 bytes: seven words in ten common ones,
    the others drawn from 5,000 rarer ones, the first of those most often
    (a Zipf-like law, as words of real text come)."""
    rng = random.Random(seed)
    rare = _vocabulary(rng, 5_000)
    common = _COMMON.split()
    weights = [1 / (rank + 1) for rank in range(len(rare))]
    made = []
    for n in range(count):
        words: list[str] = []
        while sum(map(len, words)) + len(words) < 250:
            if rng.random() < 0.7:
                words.append(rng.choice(common))
            else:
                words.extend(rng.choices(rare, weights))
        made.append(" ".join(words) + f" ({n}).")
    return made


def _turn(said: list[str], n: int) -> list[TResponseInputItem]:
    return [
        {"role": "user", "content": said[2 * n]},
        {"role": "assistant", "content": said[2 * n + 1]},
    ]


async def ours(path: Path, turns: int) -> None:
    said = texts(2 * turns)
    store = await SqlStore.open(str(path))
    try:
        session = StoreSession(store, "chat")
        for n in range(turns):
            await session.add_items(_turn(said, n))
    finally:
        await store.close()


async def theirs(path: Path, turns: int) -> None:
    from agents.memory import SQLiteSession

    said = texts(2 * turns)
    session = SQLiteSession("chat", str(path))
    try:
        for n in range(turns):
            await session.add_items(_turn(said, n))
    finally:
        session.close()


def checkpointed(path: Path) -> int:
    """The file's bytes once its write-ahead log is copied into it."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path.stat().st_size


def breakdown(path: Path) -> list[tuple[str, int]]:
    """Bytes of each table and index (their pages), largest first."""
    db = sqlite3.connect(path)
    try:
        query = "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC, 1"
        return [(name, size) for name, size in db.execute(query)]
    finally:
        db.close()


async def measured(work: Path, turns: int) -> tuple[Path, Path]:
    mine, other = work / f"ours-{turns}.db", work / f"theirs-{turns}.db"
    await ours(mine, turns)
    await theirs(other, turns)
    return mine, other


async def size() -> list[Table]:
    """The part's table: bytes per turn at each of `TURNS` (a size has no noise:
    each run measures it again, to the byte the same)."""
    table = Table("bytes per turn, SQLite: against openai-agents SQLiteSession", "ours", "theirs")
    with tempfile.TemporaryDirectory(prefix="sessionstore-size-") as work:
        for turns in TURNS:
            mine, other = await measured(Path(work), turns)
            table.add(
                f"bytes per turn at {turns:,} turns (target ≤1.5x)",
                [checkpointed(mine) / turns],
                [checkpointed(other) / turns],
                unit="bytes",
            )
    return [table]


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sessionstore-size-") as work:
        for turns in TURNS:
            mine, other = await measured(Path(work), turns)
            a, b = checkpointed(mine), checkpointed(other)
            print(f"\n{turns:,} turns: ours {a:,} B ({a / turns:,.0f} a turn), ", end="")
            print(f"SQLiteSession {b:,} B ({b / turns:,.0f} a turn): {a / b:.2f}x")
            for side, path in (("ours", mine), ("theirs", other)):
                for name, used in breakdown(path):
                    print(f"  {side:6} {name:44} {used:>10,} B {used / turns:>8,.1f} a turn")


if __name__ == "__main__":
    asyncio.run(main())
