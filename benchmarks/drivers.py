"""The drivers part of the benchmark: SqlStore as it runs against the same
statements on SQLAlchemy's asyncio engine over aiosqlite.

The design first named aiosqlite (SQLAlchemy's asyncio on it) for SQLite.
The store runs the standard library's sqlite3 instead, each transaction
whole in a worker thread of its own (a quick read on the event loop's
thread), one hop per transaction however many statements it holds;
through aiosqlite every statement, fetch and commit is a hop of its own to
aiosqlite's thread and back. Here, on fresh databases of sessionstore's
schema holding a session of 1,000 messages and a compaction keeping the
last 50, in the same run:

- an append (one writer): `SqlStore.append` against one ``BEGIN
  IMMEDIATE`` transaction of an append's statements (those of run.py's
  raw floor: the session's row, the last digest, the entry with its chained
  digest, the activity row, the size of the search backlog; every 256
  entries a transaction of the backlog's word rows and the index's mark);
- a first context: `load_context` with the store's caches dropped against
  the statements of a first context (the erasure mark, the session's row,
  its last seq, its last compaction, the messages kept from it) in one
  read transaction, each line validated by pydantic;
- a turn: an append, then `load_context` (the store keeps the context it
  built) against the append's statements, then the statement checking the
  session's last seq and the newest erasure and the one reading the
  entries since, validated.

Each is timed on the clock and in CPU time (the process's, all its
threads: a loaded machine delays each hop between threads, which the
clock shows and the CPU time does not). Our side is the public API; theirs runs the SQL text with
``exec_driver_sql`` on an ``AsyncConnection`` of
``create_async_engine("sqlite+aiosqlite:///...")`` (WAL, synchronous=NORMAL,
foreign keys on, as the store's), the cheapest way through SQLAlchemy's
asyncio: no statement compiled, no ORM. Needs aiosqlite and
SQLAlchemy's asyncio (the ``dev`` or ``bench`` extra); without them the
part is skipped, saying so.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from messages import batches, entry
from pydantic import Field, TypeAdapter
from results import Table

from sessionstore import CompactionEntry, MessageEntry, SessionMeta, SqlStore, encode
from sessionstore.backends.sql.digests import entry_digest
from sessionstore.backends.sql.postings import packed_rows
from sessionstore.backends.sql.wordindex import BACKLOG
from sessionstore.backends.words import words

HISTORY = 1_000  # messages of the session, before its compaction
KEPT = 50  # messages the compaction keeps
_ENTRY: TypeAdapter[MessageEntry | CompactionEntry] = TypeAdapter(
    Annotated[MessageEntry | CompactionEntry, Field(discriminator="type")]
)
_validate = _ENTRY.validator.validate_json
_Figure = tuple[float, float]  # seconds per call: on the clock, and of CPU

_SESSION = "SELECT pk, header, digest, base_pk, base_seq FROM sessions WHERE id = ?"
_LAST_DIGEST = "SELECT seq, digest FROM entries WHERE session_pk = ? ORDER BY seq DESC LIMIT 1"
_INSERT = (
    "INSERT INTO entries (session_pk, seq, entry_id, type, timestamp, first_kept_id, "
    "line, digest) VALUES (?, ?, ?, 'message', ?, NULL, ?, ?)"
)
_ACTIVITY = (
    "INSERT INTO activity (session_pk, tick, at) VALUES (?, (SELECT max("
    "(SELECT coalesce(max(tick), 0) FROM listing), "
    "(SELECT coalesce(max(tick), 0) FROM spent_ticks)) + 1), ?) RETURNING tick"
)
_BACKLOG = "SELECT indexed, rule, (SELECT coalesce(max(rowid), 0) FROM entries) FROM search_mark"
_POSTINGS = (
    "INSERT OR REPLACE INTO search_postings (word, session_pk, batch, postings) VALUES (?, ?, ?, ?)"
)
_MARK = "UPDATE search_mark SET indexed = ?"
_ERASED = "SELECT coalesce(max(seq), 0) FROM erasures"
_LAST_SEQ = "SELECT coalesce(max(seq), 0) FROM entries WHERE session_pk = ?"
_PROBE = (
    "SELECT (SELECT coalesce(max(seq), 0) FROM erasures), "
    "(SELECT coalesce(max(seq), 0) FROM entries WHERE session_pk = ?)"
)
_COMPACTION = (
    "SELECT seq, line, first_kept_id FROM entries WHERE session_pk = ? AND seq <= ? "
    "AND type = 'compaction' ORDER BY seq DESC LIMIT 1"
)
_KEPT = (
    "SELECT seq, entry_id, line FROM entries WHERE session_pk = ? AND type = 'message' "
    "AND seq >= coalesce((SELECT min(seq) FROM entries WHERE session_pk = ? "
    "AND entry_id = ? AND type = 'message' AND seq <= ?), ?) AND seq <= ? ORDER BY seq"
)
_SINCE = (
    "SELECT seq, entry_id, line, type FROM entries WHERE session_pk = ? AND seq > ? ORDER BY seq"
)


def message_digest(previous: bytes, one: MessageEntry, line: str) -> bytes:
    """The digest an append stores for the message ``one`` (its line ``line``)."""
    row = {
        "entry_id": one.id,
        "type": "message",
        "timestamp": one.timestamp,
        "first_kept_id": None,
        "line": line,
    }
    return entry_digest(previous, row)


async def _filled(path: Path) -> None:
    """A database of sessionstore's schema holding session ``s``: `HISTORY`
    messages, then a compaction keeping the last `KEPT`."""
    async with await SqlStore.open(str(path)) as store:
        await store.create(SessionMeta(id="s"))
        for batch in batches(HISTORY):
            await store.append_many("s", batch)
        cut = f"e{HISTORY - KEPT}"
        compaction = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id=cut)
        await store.append("s", compaction)


class _Aiosqlite:
    """The store's statements on SQLAlchemy's asyncio engine over aiosqlite."""

    def __init__(self, path: Path) -> None:
        from sqlalchemy import event
        from sqlalchemy.ext.asyncio import create_async_engine

        self.engine = create_async_engine(f"sqlite+aiosqlite:///{path}")

        @event.listens_for(self.engine.sync_engine, "connect")
        def pragmas(dbapi: Any, _: object) -> None:
            dbapi.isolation_level = None  # BEGIN is the statements' own, as the store's
            cursor = dbapi.cursor()
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()

        self.conn: Any = None
        self.backlog: list[tuple[int, str]] = []  # (seq, text) not indexed yet
        self.mark = self.seq = self.pk = 0

    async def open(self) -> None:
        self.conn = await self.engine.connect()
        (self.mark,) = (await self.conn.exec_driver_sql("SELECT indexed FROM search_mark")).one()
        (self.pk, *_) = (await self.conn.exec_driver_sql(_SESSION, ("s",))).one()
        (self.seq,) = (await self.conn.exec_driver_sql(_LAST_SEQ, (self.pk,))).one()
        await self.conn.commit()

    async def close(self) -> None:
        await self.conn.close()
        await self.engine.dispose()

    async def append(self, one: MessageEntry) -> None:
        """An append's transaction, and the index's when the backlog is full."""
        run = self.conn.exec_driver_sql
        line = encode(one)
        await run("BEGIN IMMEDIATE")
        (pk, *_) = (await run(_SESSION, ("s",))).one()
        found = (await run(_LAST_DIGEST, (pk,))).first()
        digest = found[1] if found is not None else bytes(16)
        self.seq += 1
        digest = message_digest(digest, one, line)
        await run(_INSERT, (pk, self.seq, one.id, one.timestamp, line, digest))
        (await run(_ACTIVITY, (pk, datetime.now(UTC).isoformat()))).one()
        _, _, top = (await run(_BACKLOG)).one()
        await self.conn.commit()
        self.backlog.append((self.seq, one.message.text()))
        if top - self.mark >= BACKLOG:
            await run("BEGIN IMMEDIATE")
            made = []
            for seq, said in self.backlog:
                found_words = words(said)
                made.append((pk, seq, Counter(found_words), len(found_words)))
            await run(_POSTINGS, packed_rows(made))
            await run(_MARK, (top,))
            await self.conn.commit()
            self.mark, self.backlog = top, []

    async def first(self) -> list[object]:
        """A first context's statements in one read transaction, validated."""
        run = self.conn.exec_driver_sql
        await run("BEGIN")
        (await run(_ERASED)).one()
        (pk, *_) = (await run(_SESSION, ("s",))).one()
        (last,) = (await run(_LAST_SEQ, (pk,))).one()
        seq, line, kept = (await run(_COMPACTION, (pk, last))).one()
        rows = (await run(_KEPT, (pk, pk, kept, seq, seq + 1, last))).all()
        await self.conn.commit()
        return [_validate(line), *(_validate(row[2]) for row in rows)]

    async def since(self, after: int) -> list[object]:
        """A kept context's statements: the last seq and the newest erasure,
        then the entries since ``after``, validated."""
        run = self.conn.exec_driver_sql
        await run("BEGIN")
        _, last = (await run(_PROBE, (self.pk,))).one()
        rows = (await run(_SINCE, (self.pk, after))).all() if last > after else []
        await self.conn.commit()
        return [_validate(row[2]) for row in rows]


async def _timed(calls: int, call: Callable[[int], Awaitable[object]]) -> _Figure:
    """Seconds per call of ``call(n)``, n = 0 .. ``calls`` - 1, and the
    process's CPU seconds per call (every thread's: aiosqlite's too)."""
    start, cpu = time.perf_counter(), time.process_time()
    for n in range(calls):
        await call(n)
    return (time.perf_counter() - start) / calls, (time.process_time() - cpu) / calls


async def _round(where: Path, quick: bool) -> dict[str, tuple[_Figure, _Figure]]:
    """One round: each work, ours and on aiosqlite, on databases of its own."""
    figures: dict[str, tuple[_Figure, _Figure]] = {}
    for work in ("append", "first context", "turn"):
        ours, theirs = where / f"ours-{work}.db", where / f"theirs-{work}.db"
        await _filled(ours)
        await _filled(theirs)
        figures[work] = await _work(work, ours, theirs, quick)
        ours.unlink()
        theirs.unlink()
    return figures


async def _work(work: str, ours: Path, theirs: Path, quick: bool) -> tuple[_Figure, _Figure]:
    """Seconds per call of ``work`` on our store and on aiosqlite."""
    calls = (200 if work == "append" else 50) if quick else (1_000 if work == "append" else 200)
    made = [entry(HISTORY + n) for n in range(calls)]
    other = _Aiosqlite(theirs)
    await other.open()
    try:
        async with await SqlStore.open(str(ours)) as store:
            await store.load_context("s")
            if work == "append":
                return (
                    await _timed(calls, lambda n: store.append("s", made[n])),
                    await _timed(calls, lambda n: other.append(made[n])),
                )
            if work == "first context":

                def first(_: int) -> Awaitable[object]:
                    store.drop_caches()
                    return store.load_context("s")

                return await _timed(calls, first), await _timed(calls, lambda _: other.first())

            async def turn(n: int) -> None:
                await store.append("s", made[n])
                await store.load_context("s")

            async def their_turn(n: int) -> None:
                before = other.seq
                await other.append(made[n])
                await other.since(before)

            return await _timed(calls, turn), await _timed(calls, their_turn)
    finally:
        await other.close()


async def drivers(quick: bool, rounds: int) -> list[Table]:
    """The table: each work on the store as it runs against aiosqlite."""
    missing = [name for name in ("aiosqlite", "greenlet") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"(drivers: skipped, {missing[0]} is not installed: pip install -e '.[bench]')")
        return []
    table = Table(
        "SqlStore on SQLite: its threads on sqlite3, against SQLAlchemy asyncio + aiosqlite",
        "sessionstore",
        "aiosqlite",
    )
    names = {
        "append": "append, one writer (per append)",
        "first context": f"a first load_context, {KEPT} kept of {HISTORY:,}",
        "turn": "a turn: append, then load_context (per turn)",
    }
    runs = []
    with tempfile.TemporaryDirectory(prefix="sessionstore-drivers-") as where:
        for _ in range(rounds):
            runs.append(await _round(Path(where), quick))
    for work, name in names.items():
        table.add(name, [run[work][0][0] for run in runs], [run[work][1][0] for run in runs])
    for work, name in names.items():
        table.add(
            f"{name}, CPU time",
            [run[work][0][1] for run in runs],
            [run[work][1][1] for run in runs],
        )
    return [table]
