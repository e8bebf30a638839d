"""The PostgreSQL part of the benchmark: the SQL store against psycopg by hand,
and against openai-agents' SQLAlchemySession.

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

With the ``bench`` extra, a second table sets sessionstore beside
openai-agents' SQLAlchemySession on the same server (an async engine of the
same URL), on the same messages (benchmarks/messages.py), timed round by
round, one side then the other:

- an append, one writer: ``store.append`` against ``add_items`` of one
  message, each side to a new session each round;
- a load of 5,000 messages (100,000 without --quick) written 5,000 at a
  time: ``store.load`` into models against ``get_items`` (dicts, from
  ``json.loads``).

The baseline's table and the store's live in the database given; each run
uses new session ids and drops its baseline table and the peer's tables
(new names each run) at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

from messages import batches, entry, text
from peers import OpenAIAgentsOnPostgres
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
            ours.append(await _appends(store, appends))
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
        peers = await _against_openai_agents(url, store, appends, size, rounds)
    finally:
        await store.close()
        raw.close()
    return [table, *peers]


async def _appends(store: SqlStore, count: int) -> float:
    """Seconds per ``store.append`` of one message, to a new session."""
    session = await store.create(SessionMeta.new())
    start = time.perf_counter()
    for n in range(count):
        await store.append(session, entry(n))
    return (time.perf_counter() - start) / count


async def _against_openai_agents(
    url: str, store: SqlStore, appends: int, size: int, rounds: int
) -> list[Table]:
    """The append (one writer) and the load on openai-agents' SQLAlchemySession
    against the store, round by round, or no table when openai-agents is not
    installed. Each side is timed in the same rounds as the other: on a busy
    machine, figures taken minutes apart would not compare."""
    try:
        peer = OpenAIAgentsOnPostgres(url)
    except ImportError:
        print("\n(openai-agents on PostgreSQL skipped: pip install -e '.[bench]' to compare)")
        return []
    table = Table(
        "PostgreSQL: against openai-agents SQLAlchemySession", "sessionstore", "openai-agents"
    )
    texts = [text(n) for n in range(size)]
    try:
        await peer.create_tables()
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(await _appends(store, appends))
            theirs.append(await peer.appends(texts[:appends]))
        table.add("append, one writer (per append)", ours, theirs)

        big, big_peer = await store.create(SessionMeta.new()), uuid.uuid4().hex
        for batch in batches(size):
            await store.append_many(big, batch)
        await peer.fill(big_peer, texts)
        loads, theirs = [], []
        for _ in range(rounds):
            loads.append(await aper_call(lambda: store.load(big), 1))
            theirs.append(await peer.load(big_peer))
        table.add(f"load {size:,} messages", loads, theirs)
    finally:
        await peer.close()
    return [table]
