"""The PostgreSQL part of the benchmark: the SQL store against psycopg by hand.

Runs when ``SESSIONSTORE_PG_URL`` names a server (``.ci/postgres start DIR``
starts a throwaway one; the URL is the store's, ``postgresql+psycopg://...``),
and says it was skipped otherwise. On that one server, in the same run:

- an append, one writer: ``store.append`` against psycopg running one
  ``INSERT`` and a commit per line on a table of (session, seq, line);
- 50 tasks appending at once: the same baseline (its commits are what
  group commit saves);
- a load of the big session (5,000 entries, 100,000 without --quick) into
  models, against ``SELECT`` + ``json.loads`` of its lines;
- ``load_context`` of 50 kept messages, asked again, against the indexed
  tail query.

The baseline's table and the store's live in the database given; each run
uses new session ids and drops its baseline table at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

from messages import entry
from results import Table, aper_call
from sqlalchemy.engine import make_url

from sessionstore import CompactionEntry, SessionMeta, SqlStore, encode

KEPT = 50


class _Raw:
    """psycopg by hand: one connection, a table of lines."""

    def __init__(self, url: str) -> None:
        import psycopg

        conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.table = f"bench_raw_{uuid.uuid4().hex[:8]}"
        self.connection = psycopg.connect(conninfo)
        with self.connection.transaction():
            self.connection.execute(
                f"CREATE TABLE {self.table} (session text, seq int, line text, "
                "PRIMARY KEY (session, seq))"
            )

    def appends(self, session: str, lines: list[str]) -> float:
        start = time.perf_counter()
        for seq, line in enumerate(lines, 1):
            with self.connection.transaction():
                self.connection.execute(
                    f"INSERT INTO {self.table} VALUES (%s, %s, %s)", (session, seq, line)
                )
        return (time.perf_counter() - start) / len(lines)

    def fill(self, session: str, lines: list[str]) -> None:
        with self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self.table} VALUES (%s, %s, %s)",
                [(session, seq, line) for seq, line in enumerate(lines, 1)],
            )

    def load(self, session: str) -> float:
        start = time.perf_counter()
        with self.connection.transaction():
            rows = self.connection.execute(
                f"SELECT line FROM {self.table} WHERE session = %s ORDER BY seq", (session,)
            )
            [json.loads(line) for (line,) in rows]
        return time.perf_counter() - start

    def tail(self, session: str, after: int, times: int) -> float:
        start = time.perf_counter()
        for _ in range(times):
            with self.connection.transaction():
                self.connection.execute(
                    f"SELECT line FROM {self.table} WHERE session = %s AND seq > %s ORDER BY seq",
                    (session, after),
                ).fetchall()
        return (time.perf_counter() - start) / times

    def close(self) -> None:
        with self.connection.transaction():
            self.connection.execute(f"DROP TABLE {self.table}")
        self.connection.close()


async def postgres(quick: bool, rounds: int) -> list[Table]:
    """The PostgreSQL table, or none without a server."""
    url = os.environ.get("SESSIONSTORE_PG_URL")
    if not url:
        print("\n(postgres skipped: set SESSIONSTORE_PG_URL to a server, e.g. .ci/postgres start)")
        return []
    table = Table("PostgreSQL: against psycopg by hand, same server", "sessionstore", "psycopg")
    appends, size = (100, 5_000) if quick else (500, 100_000)
    lines = [encode(entry(n)) for n in range(appends)]
    raw = _Raw(url)
    store = await SqlStore.open(url)
    try:
        ours, theirs = [], []
        for _ in range(rounds):
            session = await store.create(SessionMeta.new())
            start = time.perf_counter()
            for n in range(appends):
                await store.append(session, entry(n))
            ours.append((time.perf_counter() - start) / appends)
            theirs.append(raw.appends(uuid.uuid4().hex, lines))
        table.add("append, one writer (per append)", ours, theirs)

        gathered = []
        for _ in range(rounds):
            session = await store.create(SessionMeta.new())
            each = appends // 50 or 1

            async def writer(task: int, session: str = session, each: int = each) -> None:
                for n in range(each):
                    await store.append(session, entry(task * each + n))

            start = time.perf_counter()
            await asyncio.gather(*(writer(task) for task in range(50)))
            gathered.append((time.perf_counter() - start) / (50 * each))
        table.add("append, 50 tasks at once (per append)", gathered, theirs)

        big = await store.create(SessionMeta.new())
        entries = [entry(n) for n in range(size)]
        for start_at in range(0, size, 5_000):
            await store.append_many(big, entries[start_at : start_at + 5_000])
        big_raw = uuid.uuid4().hex
        raw.fill(big_raw, [encode(each) for each in entries])
        loads = [await aper_call(lambda: store.load(big), 1) for _ in range(rounds)]
        table.add(
            f"load {size:,} entries into models, vs + json.loads",
            loads,
            [raw.load(big_raw) for _ in range(rounds)],
        )
        # The cut comes after the loads, so that they read the very messages
        # the baselines read, and nothing more.
        cut = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id=f"e{size - KEPT}")
        await store.append(big, cut)
        await store.load_context(big)
        contexts = [await aper_call(lambda: store.load_context(big), 50) for _ in range(rounds)]
        table.add(
            f"load_context, {KEPT} kept of {size:,}, asked again",
            contexts,
            [raw.tail(big_raw, size - KEPT, 50) for _ in range(rounds)],
        )
    finally:
        await store.close()
        raw.close()
    return [table]
