"""The browse part of the benchmark: a page of summaries and a search, as
the number of sessions grows.

One SQLite store grows from 10,000 to 100,000 to 1,000,000 sessions (1,000
and 10,000 with --quick), built through the public API (one import per
session: a header, a user message, an assistant reply), with 1,000
owners. At each size it times a first page of ``summaries`` (50, by last
activity), a page far down the listing (from a cursor), a page of one
owner's sessions, a page by creation time, and a search for a word only 20
messages hold, whatever the size. The baseline, in the same run, is raw
sqlite3 over tables holding the same listing (id, owner, time, indexed)
and an FTS5 index of the same texts: what a hand-written listing and search
cost. A second table sets each figure at the largest size against the same
at the smallest: flat is 1.00x.

The store is built once per process and reused by every run (only read).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from functools import partial
from pathlib import Path

from results import Table, aper_call, per_call

from sessionstore import Message, MessageEntry, SessionMeta, SessionStore, SqlStore, encode

OWNERS = 1_000
RARE = "zebra"  # in the first message of sessions 0..19 only
PAGE = 50


def _session(n: int) -> tuple[str, list[str]]:
    """Session ``n``: its header line and its two entry lines."""
    created = f"2026-01-01T00:00:00.{n:09d}+00:00"  # distinct, in creation order
    meta = SessionMeta(id=f"s{n:07d}", created_at=created, owner=f"user-{n % OWNERS}")
    rare = f" {RARE}" if n < 20 else ""
    question = Message.user(f"How do I book train {n} to Lyon{rare}?")
    answer = Message.assistant(f"Train {n} leaves at nine; booking is open.")
    lines = [
        encode(MessageEntry(id=f"{meta.id}-q", timestamp=created, message=question)),
        encode(MessageEntry(id=f"{meta.id}-a", timestamp=created, message=answer)),
    ]
    return encode(meta), lines


async def _lines(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


class _Sizes:
    """The store and the raw baseline, grown size by size (kept between runs)."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.made = 0
        self.path = where / "browse.db"
        self.raw = where / "raw.db"
        with closing(sqlite3.connect(self.raw)) as raw:
            raw.execute("PRAGMA journal_mode=WAL")
            raw.executescript(
                "CREATE TABLE listing (id TEXT PRIMARY KEY, owner TEXT, tick INTEGER, "
                "created TEXT);"
                "CREATE INDEX by_tick ON listing (tick);"
                "CREATE INDEX by_owner ON listing (owner, tick);"
                "CREATE INDEX by_created ON listing (created, id);"
                "CREATE VIRTUAL TABLE words USING fts5(text);"
            )

    async def grow(self, size: int) -> None:
        """Sessions up to ``size``, in the store and in the raw tables."""
        store = await SqlStore.open(str(self.path))
        try:
            for n in range(self.made, size):
                header, lines = _session(n)
                await store.import_session(header, _lines(lines))
        finally:
            await store.close()
        with closing(sqlite3.connect(self.raw)) as raw, raw:
            made = range(self.made, size)
            raw.executemany(
                "INSERT INTO listing VALUES (?, ?, ?, ?)",
                ((f"s{n:07d}", f"user-{n % OWNERS}", n, f"{n:09d}") for n in made),
            )
            raw.executemany(
                "INSERT INTO words (text) VALUES (?)",
                (
                    (f"How do I book train {n} to Lyon{f' {RARE}' if n < 20 else ''}?",)
                    for n in made
                ),
            )
        self.made = size


_built: dict[Path, _Sizes] = {}


def _fetch(raw: sqlite3.Connection, query: str, args: tuple[object, ...]) -> object:
    """One raw query, every row fetched."""
    return raw.execute(query, args).fetchall()


async def _ours(store: SessionStore, rounds: int, times: int) -> dict[str, list[float]]:
    """Seconds per call of each browse operation on the store."""
    deep = await store.summaries(limit=PAGE)
    for _ in range(20):  # 1,000 sessions down, or the last full page of a smaller store
        page = await store.summaries(limit=PAGE, after=deep[-1].cursor)
        if len(page) < PAGE:
            break
        deep = page
    cursor = deep[-1].cursor
    hits = await store.search(RARE)
    assert len(hits) == 20, hits
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "first page": lambda: store.summaries(limit=PAGE),
        "a page 1,000 sessions down": lambda: store.summaries(limit=PAGE, after=cursor),
        "one owner's first page": lambda: store.summaries(owner="user-7", limit=PAGE),
        "first page by creation": lambda: store.summaries(order="created", limit=PAGE),
        "search a word 20 messages hold": lambda: store.search(RARE),
    }
    return {
        name: [await aper_call(call, times) for _ in range(rounds)] for name, call in calls.items()
    }


def _raw(path: Path, rounds: int, times: int) -> dict[str, list[float]]:
    """The same by hand: one indexed query each (its rows fetched)."""
    with closing(sqlite3.connect(path)) as raw:
        queries = {
            "first page": ("SELECT * FROM listing ORDER BY tick DESC LIMIT 50", ()),
            "a page 1,000 sessions down": (
                "SELECT * FROM listing WHERE tick < ? ORDER BY tick DESC LIMIT 50",
                (raw.execute("SELECT max(tick) - 1050 FROM listing").fetchone()[0],),
            ),
            "one owner's first page": (
                "SELECT * FROM listing WHERE owner = ? ORDER BY tick DESC LIMIT 50",
                ("user-7",),
            ),
            "first page by creation": (
                "SELECT * FROM listing ORDER BY created DESC, id DESC LIMIT 50",
                (),
            ),
            "search a word 20 messages hold": (
                "SELECT rowid, snippet(words, 0, '[', ']', '…', 20) FROM words "
                "WHERE words MATCH ? ORDER BY rank LIMIT 20",
                (RARE,),
            ),
        }
        return {
            name: [per_call(partial(_fetch, raw, query, args), times) for _ in range(rounds)]
            for name, (query, args) in queries.items()
        }


async def browse(where: Path, quick: bool, rounds: int) -> list[Table]:
    """The browse tables: each operation against raw sqlite3 at each size,
    and the largest size against the smallest."""
    sizes = (1_000, 10_000) if quick else (10_000, 100_000, 1_000_000)
    if where not in _built:  # built once, grown by every run
        _built[where] = _Sizes(where)
    built = _built[where]
    against_raw = Table("browse and search, SQLite", "sessionstore", "raw sqlite3")
    flat = Table(
        f"browse and search at {sizes[-1]:,} sessions against {sizes[0]:,}",
        f"{sizes[-1]:,}",
        f"{sizes[0]:,}",
    )
    figures: dict[int, dict[str, list[float]]] = {}
    times = 5 if quick else 20
    for size in sizes:
        if built.made < size:
            started = time.perf_counter()
            await built.grow(size)
            print(f"(browse: {size:,} sessions built in {time.perf_counter() - started:.0f} s)")
        store = await SqlStore.open(str(built.path))
        try:
            figures[size] = await _ours(store, rounds, times)
        finally:
            await store.close()
        raw = _raw(built.raw, rounds, times)
        for name, ours in figures[size].items():
            against_raw.add(f"{name}, {size:,} sessions", ours, raw[name])
    for name in figures[sizes[0]]:
        flat.add(name, figures[sizes[-1]][name], figures[sizes[0]][name])
    return [against_raw, flat]
