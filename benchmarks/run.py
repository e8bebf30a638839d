"""Benchmarks: sessionstore against raw sqlite3 (and its peers), as ratios in one run.

Run on demand (not in CI):

    .venv/bin/python benchmarks/run.py            # 3 runs, writes RESULTS.md
    .venv/bin/python benchmarks/run.py --quick    # a smoke run, printed only

Every figure is a median of several rounds, printed beside a baseline doing
the same work, measured in the same run, and the ratio between them:
machines are noisy, ratios much less so. Small operations are timed as the
mean of a batch of calls, so one round measures the steady state an agent
sees turn after turn.

The whole benchmark runs --runs times (3 unless told), each run's tables
printed as it ends. Then benchmarks/RESULTS.md (or --output) gets, for
every row, the median ratio of the runs and their spread (lowest and
highest ratio), with the machine, the date, the commit and the command.
A --quick run, or a run of some parts (--only), writes no file unless
given --output.

Baselines: the standard library's sqlite3 on the same pragmas (WAL,
synchronous=NORMAL) doing the same work by hand: one transaction per
append, SELECT + json.loads for a load, the indexed tail query for a
context (bare, and with json.loads of its lines), both for an agent's turn
(append a message, then read the context), one SELECT of headers for a
list, and a plain file copy (no fsync) for an export, besides a raw dump
of the same rows with sqlite3, written and fsynced (the floor of any
export from SQLite). A cold start, ``python -c "import sessionstore"`` in
a new process, is measured against ``from pydantic import BaseModel``, the
package's bytecode compiled first as pip does when it installs; a first
``load_context`` in a new process (import, open, read the longest history)
against a raw sqlite3 script reading the same tail, beside the floors of
any program handing back pydantic models (that script after pydantic's
import and a first model class: pydantic builds its schema machinery and
loads its plugins then, some 30 ms here) and of any async store on
SQLAlchemy (after asyncio's and SQLAlchemy's imports too); the import of
sessionstore is shown against that first model as well. Reads of models have
their floor rows as well: the same rows validated by pydantic itself. An
append has its floor row too: raw sqlite3 running the statements of an
append on a database of sessionstore's schema (digest chain, listing,
search backlog); 50 tasks appending at once theirs: raw sqlite3 writing 50
appends a transaction, with a row per distinct word of the messages of each
indexed batch (as the word index packs them), the floor of group commit with that index.

Forks: a SQLite fork at an entry of a session of 1,000,000 entries (20,000
with --quick), timed per fork, against one ``INSERT INTO sessions`` of the
same row by hand with sqlite3 (what any fork must write), and the bytes
each adds to the database (its file's growth, the write-ahead log
checkpointed, over the forks made; the rows it adds are in the row's
name). The same at 1,000 entries shows both flat as the history grows; a
JSONL fork, which copies the history by design, is shown beside it once
the JSONL store implements forks. Then chains of forks (a fork of a fork
...) 1,000 deep against 10 deep on SQLite: summaries, what ``ls --tree``
reads, integrity per session and an export per line written, flat when
linear in depth (benchmarks/chains.py).

Erases: sessions of 50 entries erased, one by one, from the SQLite
databases holding the 1,000-entry and the longest histories (flat as the
history beside them grows), against raw sqlite3 deleting such a session's
rows by hand, bare and kept as an erase promises (``secure_delete``, a
FULL commit, the WAL checkpointed away: the floor of any erase that keeps
that promise).

Browse: a page of summaries and a search on a SQLite store of 10,000,
100,000 and 1,000,000 sessions, against raw sqlite3 over the same listing
and an FTS5 index of the same texts, and the largest size against the
smallest (benchmarks/browse.py).

PostgreSQL (benchmarks/postgres.py, when ``SESSIONSTORE_PG_URL`` names a
server): appends, a load and a context against psycopg by hand on the
same server; with the ``bench`` extra, the same appends (one writer) and
load against openai-agents' SQLAlchemySession on that server too.

Sealed (benchmarks/sealed.py): a SQLite store opened with ``keys=``
(encryption at rest) against the same store plain: an append, a turn, a
first context, a search, a load of 100,000 entries.

Drivers (benchmarks/drivers.py): SqlStore on SQLite as it runs (sqlite3
in worker threads of its own, a hop per transaction) against the same
statements on SQLAlchemy's asyncio engine over aiosqlite (a hop per
statement): an append, a first context and a turn.

Effects (benchmarks/effects.py): a replay (``once`` of an effect already
done) and a find in a journal of 100,000 effects against one of 10, on SQLite, a
sealed SQLite store, JSONL, memory and PostgreSQL (with
``SESSIONSTORE_PG_URL``): flat, the key looked up in the journal's index.

Size (benchmarks/size.py): bytes per turn of a conversation in a SQLite
store, through openai-agents' StoreSession, against openai-agents'
SQLiteSession, at 100 and 1,000 turns, each file measured with its
write-ahead log checkpointed into it.

Memory (benchmarks/memory.py): the peak resident memory of a new process
importing an archive of about 2 GB (64 MB with --quick) into a new SQLite
store, and of one exporting that store, against the same process doing
no work (importing sessionstore and opening the store); the same on
JSONL; then the same on an archive an eighth of the size and on one of
long lines (tool outputs of 64 KB), to show what grows. The archives are
written once per process, in a temporary directory removed at the end.
The slowest part: some 17 minutes, 11 of them importing 2 GB into SQLite,
so it is measured in the first run only (a peak is not a noisy figure).

Frameworks (benchmarks/frameworks/, "through the frameworks"): each
adapter of sessionstore.integrations against the framework's own session,
through the framework's calls, timed round by round in the same run:
openai-agents' StoreSession against SQLiteSession (and SQLAlchemySession
on PostgreSQL, with ``SESSIONSTORE_PG_URL``) at 100 to 100,000 items,
LangChain's history against SQLChatMessageHistory (sync), pydantic-ai's
turn against its InMemoryConversationStore, and each at its longest
history against its shortest; the targets are in the rows' names.

Through ADK (benchmarks/frameworks/adk.py, ``--only adk``): Google ADK's
session service, `StoreSessionService` on a SQLite store against ADK's
DatabaseSessionService (aiosqlite, WAL, synchronous=NORMAL), and on a
memory store against InMemorySessionService, beside the floor (no store:
the events kept as JSON): append_event, get_session of the last 20
events and of all, at 100 to 3,000 events, and list_sessions at 100 to
10,000 sessions; the targets are in the rows' names.

Stalls (benchmarks/stalls.py): the event loop's longest delays (p99 and
the longest) while 50 tasks each append and read their context turn
after turn, on memory, SQLite, JSONL (and PostgreSQL with a server),
against the same 50 tasks doing that work in pure Python (the floor); the
target is a p99 of at most 2 ms. A stall is a step of each ready task
plus, on the stores working in threads, the loop's wait for the GIL.

The collector (benchmarks/collector.py): a load of 100,000 messages on
memory, SQLite and JSONL with the host's garbage collector on, against
the same load with the program holding it off: what a store leaving the
collector alone costs a whole large load.

Through LangGraph (benchmarks/checkpoints.py): a chat graph, turn after
turn, on `StoreSaver` over a SQLite store against ``AsyncSqliteSaver``
(default, and with langgraph's beta ``DeltaChannel`` messages),
``InMemorySaver`` and the graph with no checkpointer (the floor), at 100,
300 and 1,000 turns: bytes on disk, a turn, and the reads of the latest
checkpoint and of a page of ten; the targets are in the rows' names.

``--only PART`` (repeatable) runs some parts alone, e.g. ``--only forks``.

With the ``bench`` extra installed (pip install -e '.[bench]'), the same
appends and loads run on openai-agents' SQLiteSession and LangChain's
SQLChatMessageHistory (async, on aiosqlite), both on WAL with
synchronous=NORMAL too (benchmarks/peers.py), beside the floors of our
side: an append's work by hand on our schema (its line, digest, activity
and word rows), and our rows read raw then validated by pydantic (the
peers hand back unchecked dicts).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import inspect
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

from browse import browse
from chains import fork_chains
from checkpoints import checkpoints
from collector import collector
from drivers import drivers, message_digest
from effects import effects
from frameworks import adk_part, frameworks
from memory import memory
from messages import batches, entry, text
from peers import find_peers
from postgres import postgres
from pydantic import Field, TypeAdapter
from results import Setting, Table, aper_call, per_call, process_seconds, write_report
from sealed import sealed
from size import size
from stalls import stalls
from startup import command_line

import sessionstore
from sessionstore import (
    CompactionEntry,
    JsonlStore,
    MessageEntry,
    SessionMeta,
    SessionStore,
    SqlStore,
    encode,
    export_archive,
)
from sessionstore.backends.jsonl import HINTS
from sessionstore.backends.sql import wordindex
from sessionstore.backends.sql.postings import packed_rows
from sessionstore.backends.words import words

KEPT = 50  # messages a compaction keeps, for load_context
ENTRY: TypeAdapter[MessageEntry | CompactionEntry] = TypeAdapter(
    Annotated[MessageEntry | CompactionEntry, Field(discriminator="type")]
)
"""pydantic's validation of an entry line, the floor of a reader handing back models."""
# pydantic's validators called directly, as sessionstore's reader calls them
# (sessionstore.wire.stored): a floor pays no wrapper the store does not.
validate_entry = ENTRY.validator.validate_json
validate_header = SessionMeta.__pydantic_validator__.validate_json
ERASED = 50  # entries of a session erased
RAW_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries "
    "(session INTEGER, seq INTEGER, line TEXT, PRIMARY KEY (session, seq))"
)


async def fill(store: SessionStore, session_id: str, count: int) -> None:
    """A session of ``count`` messages, then a compaction keeping the last `KEPT`."""
    await store.create(SessionMeta(id=session_id))
    for batch in batches(count):
        await store.append_many(session_id, batch)
    cut = f"e{count - KEPT}"
    await store.append(
        session_id, CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id=cut)
    )


def forget(store: SessionStore) -> None:
    """Drop what a store keeps between calls, to time a first call."""
    store.drop_caches()


async def open_kind(kind: str, where: Path) -> SessionStore:
    if kind == "sqlite":
        return await SqlStore.open(str(where))
    return JsonlStore(where)


def raw_connection(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def raw_appends(path: Path, lines: list[str]) -> float:
    """Seconds per durable append with raw sqlite3: one transaction each."""
    connection = raw_connection(path)
    connection.execute(RAW_SCHEMA)
    start = time.perf_counter()
    for seq, line in enumerate(lines, 1):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO entries VALUES (1, ?, ?)", (seq, line))
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed / len(lines)


def posting_rows(pk: int, backlog: list[tuple[int, str]]) -> list[tuple[str, int, int, bytes]]:
    """The word index's rows of messages ``(seq, text)`` indexed together, as
    ``search_postings`` keeps them: ``(word, session_pk, batch, postings)``
    for each distinct word (by sessionstore's word rule), in key order."""
    messages = []
    for seq, said in backlog:
        found = words(said)
        messages.append((pk, seq, Counter(found), len(found)))
    return packed_rows(messages)


def raw_schema_appends(
    path: Path, messages: list[MessageEntry], tail: int = 0, batch: int = 1
) -> float:
    """Seconds per append with raw sqlite3 doing, on a database of
    sessionstore's schema, the work a sessionstore append must: encode the
    entry's line, find the session, read its last seq and digest, chain the
    new row's digest, insert the entry, record the activity at the time of
    day (its trigger moves the session's listing row), look at the search
    index's backlog; and once the backlog holds `wordindex.BACKLOG`
    messages, a transaction writing their word rows (by sessionstore's word
    rule, from the texts at hand) and moving the index's mark. The floor of
    an append that keeps its wire format, digest chain, listing and word
    index, whatever the code around it. With ``batch``, that many appends
    share each transaction (one session lookup, one activity row), as
    group commit gathers concurrent appends. With ``tail``, each
    transaction is followed by a read of the last ``tail`` lines (a turn's
    context)."""
    texts = [one.message.text() for one in messages]
    connection = raw_connection(path)
    (pk,) = connection.execute("SELECT pk FROM sessions WHERE id = 's'").fetchone()
    last = connection.execute("SELECT max(seq) FROM entries WHERE session_pk = ?", (pk,))
    seq = last.fetchone()[0] or 0
    (mark,) = connection.execute("SELECT indexed FROM search_mark").fetchone()
    backlog: list[tuple[int, str]] = []  # (seq, text) of the messages not indexed yet
    start = time.perf_counter()
    for at in range(0, len(messages), batch):
        chunk = messages[at : at + batch]
        lines = [encode(one) for one in chunk]
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "SELECT pk, header, digest, base_pk, base_seq FROM sessions WHERE id = 's'"
        ).fetchone()
        (_, digest) = connection.execute(
            "SELECT seq, digest FROM entries WHERE session_pk = ? ORDER BY seq DESC LIMIT 1",
            (pk,),
        ).fetchone() or (0, bytes(16))
        rows = []
        for n, (one, line) in enumerate(zip(chunk, lines, strict=True), at):
            seq += 1
            digest = message_digest(digest, one, line)
            rows.append((pk, seq, one.id, one.timestamp, line, digest))
            backlog.append((seq, texts[n]))
        connection.executemany(
            "INSERT INTO entries (session_pk, seq, entry_id, type, timestamp, first_kept_id, "
            "line, digest) VALUES (?, ?, ?, 'message', ?, NULL, ?, ?)",
            rows,
        )
        connection.execute(
            "INSERT INTO activity (session_pk, tick, at) VALUES (?, (SELECT max("
            "(SELECT coalesce(max(tick), 0) FROM listing), "
            "(SELECT coalesce(max(tick), 0) FROM spent_ticks)) + 1), ?) RETURNING tick",
            (pk, datetime.now(UTC).isoformat()),
        ).fetchone()
        _, _, top = connection.execute(
            "SELECT indexed, rule, (SELECT coalesce(max(rowid), 0) FROM entries) FROM search_mark"
        ).fetchone()
        connection.execute("COMMIT")
        if top - mark >= wordindex.BACKLOG:
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(
                "INSERT OR REPLACE INTO search_postings (word, session_pk, batch, postings) "
                "VALUES (?, ?, ?, ?)",
                posting_rows(pk, backlog),
            )
            connection.execute("UPDATE search_mark SET indexed = ?", (top,))
            connection.execute("COMMIT")
            mark, backlog = top, []
        if tail:
            connection.execute(
                "SELECT line FROM entries WHERE session_pk = ? AND seq > ? ORDER BY seq",
                (pk, seq - tail),
            ).fetchall()
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed / len(messages)


def raw_first_context(connection: sqlite3.Connection) -> object:
    """The statements a first `load_context` of session ``big`` runs on
    sessionstore's schema (the erasure mark, the session's row, its last
    seq, its last compaction, the messages kept from it), in one read
    transaction, each line then validated by pydantic."""
    connection.execute("BEGIN")
    connection.execute("SELECT coalesce(max(seq), 0) FROM erasures").fetchone()
    pk = connection.execute(
        "SELECT pk, header, digest, base_pk, base_seq FROM sessions WHERE id = 'big'"
    ).fetchone()[0]
    (last,) = connection.execute(
        "SELECT coalesce(max(seq), 0) FROM entries WHERE session_pk = ?", (pk,)
    ).fetchone()
    seq, line, kept = connection.execute(
        "SELECT seq, line, first_kept_id FROM entries WHERE session_pk = ? AND seq <= ? "
        "AND type = 'compaction' ORDER BY seq DESC LIMIT 1",
        (pk, last),
    ).fetchone()
    rows = connection.execute(
        "SELECT seq, entry_id, line FROM entries WHERE session_pk = ? AND type = 'message' "
        "AND seq >= coalesce((SELECT min(seq) FROM entries WHERE session_pk = ? "
        "AND entry_id = ? AND type = 'message' AND seq <= ?), ?) AND seq <= ? ORDER BY seq",
        (pk, pk, kept, seq, seq + 1, last),
    ).fetchall()
    connection.execute("COMMIT")
    return [validate_entry(line), *(validate_entry(row[2]) for row in rows)]


def raw_export(path: Path, target: Path) -> float:
    """Seconds to dump the big session's lines by hand with raw sqlite3, in
    pages of 2,000 rows, into a file then synced: what any export must do."""
    connection = raw_connection(path)
    query = (
        "SELECT seq, CAST(line AS BLOB) FROM entries WHERE session_pk = 1 AND seq > ? "
        "ORDER BY seq LIMIT 2000"
    )
    start = time.perf_counter()
    with target.open("wb") as out:
        after = 0
        while rows := connection.execute(query, (after,)).fetchall():
            after = rows[-1][0]
            out.write(b"\n".join(line for _, line in rows) + b"\n")
        out.flush()
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


def database_bytes(path: Path) -> int:
    """The size of a SQLite database once its write-ahead log is checkpointed
    into the file (no store may have it open)."""
    with closing(raw_connection(path)) as connection:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert not busy, "a connection still holds the database"
    return path.stat().st_size


def database_rows(path: Path) -> tuple[int, int]:
    """How many sessions and entries rows a SQLite database holds."""
    with closing(raw_connection(path)) as connection:
        query = "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM entries)"
        sessions, entries = connection.execute(query).fetchone()
    return sessions, entries


def tree_bytes(where: Path) -> int:
    """The bytes of every file below a directory."""
    return sum(path.stat().st_size for path in where.rglob("*") if path.is_file())


def raw_forks(path: Path, count: int, rounds: int, forks: int) -> tuple[list[float], float]:
    """Seconds per fork and bytes per fork written by hand with raw sqlite3:
    one ``sessions`` row as the store's fork writes it (header, digest,
    base and shared count), one transaction each."""
    rows = []
    for _ in range(rounds * forks):
        meta = SessionMeta.new(parent_session="s")
        rows.append((meta.id, meta.created_at, encode(meta), os.urandom(32), count // 2))
    made = iter(rows)
    insert = (
        "INSERT INTO sessions (id, version, parent_session, created_at, header, digest, "
        "base_pk, base_seq) VALUES (?, 1, 's', ?, ?, ?, 1, ?)"
    )

    def fork(connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(insert, next(made))
        connection.execute("COMMIT")

    before = database_bytes(path)
    with closing(raw_connection(path)) as connection:
        times = [per_call(partial(fork, connection), forks) for _ in range(rounds)]
    return times, (database_bytes(path) - before) / len(rows)


def raw_erases(path: Path, rounds: int, each: int, *, promised: bool) -> list[float]:
    """Seconds per erase of each round with raw sqlite3: the rows of a
    session of `ERASED` lines deleted, with the session's, in one
    transaction each. ``promised``: kept as an erase promises, deleted
    bytes zeroed (``secure_delete``), the commit durable (FULL), then the
    WAL checkpointed away (TRUNCATE), as sessionstore's erase does."""
    lines = [encode(entry(n)) for n in range(ERASED)]
    times = []
    with closing(raw_connection(path)) as connection:
        connection.execute(RAW_SCHEMA)
        connection.execute("CREATE TABLE sessions (session INTEGER PRIMARY KEY, header TEXT)")
        if promised:
            connection.execute("PRAGMA secure_delete=ON")
        for round_ in range(rounds):
            first = round_ * each
            connection.execute("BEGIN")
            for session in range(first, first + each):
                connection.execute("INSERT INTO sessions VALUES (?, '{}')", (session,))
                connection.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?)",
                    [(session, seq, line) for seq, line in enumerate(lines, 1)],
                )
            connection.execute("COMMIT")
            sessions = iter(range(first, first + each))
            erase = partial(_raw_erase, connection, sessions, promised=promised)
            times.append(per_call(erase, each))
    return times


def _raw_erase(connection: sqlite3.Connection, sessions: Iterator[int], *, promised: bool) -> None:
    session = next(sessions)
    if promised:
        connection.execute("PRAGMA synchronous=FULL")
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("DELETE FROM entries WHERE session = ?", (session,))
    connection.execute("DELETE FROM sessions WHERE session = ?", (session,))
    connection.execute("COMMIT")
    if promised:
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()


async def _erase_next(store: SessionStore, ids: Iterator[str]) -> object:
    return await store.erase(next(ids), reason="benchmark")


async def store_appends(path: Path, tasks: int, each: int) -> float:
    """Seconds per append with ``tasks`` tasks appending ``each`` entries at once."""
    store = await SqlStore.open(str(path))
    await store.create(SessionMeta(id="s"))
    made = [[entry(task * each + n) for n in range(each)] for task in range(tasks)]

    async def writer(mine: list[MessageEntry]) -> None:
        for one in mine:
            await store.append("s", one)

    start = time.perf_counter()
    await asyncio.gather(*(writer(mine) for mine in made))
    elapsed = time.perf_counter() - start
    await store.close()
    return elapsed / (tasks * each)


class Bench:
    def __init__(self, work: Path, quick: bool) -> None:
        self.work = work
        self.quick = quick
        self.rounds = 3 if quick else 5
        self.size = 5_000 if quick else 100_000  # entries of the big session
        self.sessions = 1_000 if quick else 10_000
        self.long = 20_000 if quick else 1_000_000  # entries of the longest history
        self.files = 0
        self.histories: dict[tuple[str, int], Path] = {}
        self.raw = Table(
            "against raw sqlite3 (WAL, synchronous=NORMAL)", "sessionstore", "baseline"
        )
        self.flat = Table(
            f"load_context, {KEPT} kept, as the history grows", "long history", "1,000 entries"
        )
        self.forked = Table(
            "fork at an entry, as the history grows", "long history", "1,000 entries"
        )
        self.chained = Table(
            "a chain of forks (a fork of a fork ...), 1,000 deep against 10 deep",
            "1,000 deep",
            "10 deep",
        )
        self.erased = Table(
            f"erase a session of {ERASED} entries, as the history beside it grows",
            "long history",
            "1,000 entries",
        )
        self.start = Table(
            'a cold start: python -c in a new process, vs "from pydantic import BaseModel"',
            "sessionstore",
            "pydantic",
        )
        self.first = Table(
            "a first load_context in a new process (import, open, read), vs a raw sqlite3 script",
            "sessionstore",
            "raw script",
        )
        self.cli = Table(
            "the command line, started in a new process, output piped",
            "sessionstore",
            "baseline",
        )
        self.peers: list[Table] = []

    def fresh(self, suffix: str = ".db") -> Path:
        self.files += 1
        return self.work / f"{self.files}{suffix}"

    async def history(self, kind: str, count: int) -> Path:
        """A store of ``kind`` holding session ``s`` of ``count`` entries (see
        `fill`), made once per run and shared by the parts that read it."""
        where = self.histories.get((kind, count))
        if where is None:
            where = self.fresh() if kind == "sqlite" else self.fresh(".d")
            async with await open_kind(kind, where) as store:
                await fill(store, "s", count)
            self.histories[kind, count] = where
        return where

    def tables(self) -> list[Table]:
        return [
            self.raw,
            self.flat,
            self.forked,
            self.chained,
            self.erased,
            self.start,
            self.cli,
            self.first,
            *self.peers,
        ]

    async def appends(self, tasks: int, each: int) -> None:
        made = [entry(n) for n in range(tasks * each)]
        lines = [encode(one) for one in made]
        ours = [await store_appends(self.fresh(), tasks, each) for _ in range(self.rounds)]
        base = [raw_appends(self.fresh(), lines) for _ in range(self.rounds)]
        what = "one writer" if tasks == 1 else f"{tasks} tasks at once"
        self.raw.add(f"append, {what} (per append)", ours, base)
        floor = []
        for _ in range(self.rounds):
            path = self.fresh()
            async with await SqlStore.open(str(path)) as store:
                await store.create(SessionMeta(id="s"))
            floor.append(raw_schema_appends(path, made, batch=tasks))
        if tasks == 1:
            self.raw.add("raw sqlite3 doing an append's work on our schema, the floor", floor, base)
        else:
            self.raw.add(
                f"raw sqlite3 doing the work of {tasks} appends a transaction on our schema, "
                "the floor",
                floor,
                base,
            )

    async def reads(self) -> None:
        path = self.fresh()
        store = await SqlStore.open(str(path))
        await fill(store, "big", self.size)
        for n in range(self.sessions):
            await store.create(SessionMeta(id=f"s{n}"))
        raw = raw_connection(path)
        after = self.size - KEPT
        tail = f"SELECT line FROM entries WHERE session_pk = 1 AND seq > {after} ORDER BY seq"

        def raw_load() -> object:
            query = "SELECT line FROM entries WHERE session_pk = 1 ORDER BY seq"
            return [json.loads(line) for (line,) in raw.execute(query)]

        # The floor of any reader that hands back checked models: pydantic's
        # own validation of each line, straight from its JSON.
        def validated_load() -> object:
            query = "SELECT line FROM entries WHERE session_pk = 1 ORDER BY seq"
            return [validate_entry(line) for (line,) in raw.execute(query)]

        def validated_tail() -> object:
            return [validate_entry(line) for (line,) in raw.execute(tail)]

        def validated_headers() -> object:
            headers = raw.execute("SELECT header FROM sessions ORDER BY pk")
            return [validate_header(header) for (header,) in headers]

        def list_first() -> Awaitable[object]:
            forget(store)
            return store.list()

        works: list[tuple[str, Callable[[], Awaitable[object]], Callable[[], object], int]] = [
            (f"load {self.size:,} entries into models", lambda: store.load("big"), raw_load, 1),
            (
                f"load {self.size:,} entries into models, vs + pydantic's validation",
                lambda: store.load("big"),
                validated_load,
                1,
            ),
            (
                f"load_context, {KEPT} kept of {self.size:,}",
                lambda: store.load_context("big"),
                lambda: raw.execute(tail).fetchall(),
                200,
            ),
            (
                f"load_context, {KEPT} kept of {self.size:,}, vs + json.loads",
                lambda: store.load_context("big"),
                lambda: [json.loads(line) for (line,) in raw.execute(tail)],
                200,
            ),
            (
                f"list {self.sessions + 1:,} sessions",
                store.list,
                lambda: raw.execute("SELECT header FROM sessions ORDER BY pk").fetchall(),
                5,
            ),
            (
                f"list {self.sessions + 1:,} sessions, first call",
                list_first,
                lambda: raw.execute("SELECT header FROM sessions ORDER BY pk").fetchall(),
                1,
            ),
            (
                f"list {self.sessions + 1:,} sessions, first call, vs + json.loads",
                list_first,
                lambda: [
                    json.loads(header)
                    for (header,) in raw.execute("SELECT header FROM sessions ORDER BY pk")
                ],
                1,
            ),
            (
                f"list {self.sessions + 1:,} sessions, first call, vs + pydantic's validation",
                list_first,
                validated_headers,
                1,
            ),
        ]
        for name, ours, base, times in works:
            mine = [await aper_call(ours, times) for _ in range(self.rounds)]
            theirs = [per_call(base, times) for _ in range(self.rounds)]
            self.raw.add(name, mine, theirs)
        cold = []
        for _ in range(self.rounds):
            forget(store)
            cold.append(await aper_call(lambda: store.load_context("big"), 1))
        theirs = [per_call(lambda: raw.execute(tail).fetchall(), 1) for _ in range(self.rounds)]
        self.raw.add(f"load_context, {KEPT} kept of {self.size:,}, first call", cold, theirs)
        decoded = [
            per_call(lambda: [json.loads(line) for (line,) in raw.execute(tail)], 1)
            for _ in range(self.rounds)
        ]
        self.raw.add(
            f"load_context, {KEPT} kept of {self.size:,}, first call, vs + json.loads",
            cold,
            decoded,
        )
        checked = [per_call(validated_tail, 1) for _ in range(self.rounds)]
        self.raw.add(
            f"load_context, {KEPT} kept of {self.size:,}, first call, vs + pydantic's validation",
            cold,
            checked,
        )
        first_context = partial(raw_first_context, raw)
        floor = [per_call(first_context, 1) for _ in range(self.rounds)]
        self.raw.add(
            f"load_context, {KEPT} kept of {self.size:,}, first call, vs its statements by hand "
            "on our schema + pydantic's validation, the floor",
            cold,
            floor,
        )
        await self.export(store, "sqlite")
        await store.close()
        dumps = [raw_export(path, self.work / "dump") for _ in range(self.rounds)]
        size = (self.work / "dump").stat().st_size
        rate = size / 1e6 / statistics.median(dumps)
        copy = partial(shutil.copyfile, self.work / "dump", self.work / "copy")
        copies = [per_call(copy, 1) for _ in range(self.rounds)]
        self.raw.add(f"raw sqlite3 dump + fsync, the floor ({rate:.0f} MB/s)", dumps, copies)
        jsonl = JsonlStore(self.fresh(".d"))
        await fill(jsonl, "big", self.size)
        await self.export(jsonl, "jsonl")

    async def export(self, store: SessionStore, kind: str) -> None:
        ours, copies = [], []
        for n in range(self.rounds):
            target = self.work / f"archive-{kind}-{n}"
            start = time.perf_counter()
            await export_archive(store, target, sessions=["big"])
            ours.append(time.perf_counter() - start)
            exported = target / "sessions" / "big.jsonl"
            size = exported.stat().st_size
            start = time.perf_counter()
            shutil.copyfile(exported, self.work / "copy")
            copies.append(time.perf_counter() - start)
            shutil.rmtree(target)
        rate = size / 1e6 / statistics.median(ours)
        self.raw.add(f"export {size / 1e6:.0f} MB, {kind} ({rate:.0f} MB/s)", ours, copies)

    async def turns(self) -> None:
        """An agent's turn: append a message, then ask for the context."""
        turns = 50 if self.quick else 200
        ours, base, floor = [], [], []
        for _ in range(self.rounds):
            async with await SqlStore.open(str(self.fresh())) as store:
                await fill(store, "s", 1_000)
                await store.load_context("s")
                made = [entry(1_000 + n) for n in range(turns)]
                start = time.perf_counter()
                for one in made:
                    await store.append("s", one)
                    await store.load_context("s")
                ours.append((time.perf_counter() - start) / turns)
            lines = [encode(entry(n)) for n in range(1_000 + turns)]
            connection = raw_connection(self.fresh())
            connection.execute(RAW_SCHEMA)
            connection.executemany(
                "INSERT INTO entries VALUES (1, ?, ?)", list(enumerate(lines[:1_000], 1))
            )
            tail = "SELECT line FROM entries WHERE session = 1 AND seq > ? ORDER BY seq"
            start = time.perf_counter()
            for seq in range(1_001, 1_001 + turns):
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("INSERT INTO entries VALUES (1, ?, ?)", (seq, lines[seq - 1]))
                connection.execute("COMMIT")
                connection.execute(tail, (seq - KEPT,)).fetchall()
            base.append((time.perf_counter() - start) / turns)
            connection.close()
            async with await SqlStore.open(str(path := self.fresh())) as store:
                await fill(store, "s", 1_000)
            floor.append(raw_schema_appends(path, made, tail=KEPT))
        self.raw.add("a turn: append, then load_context (per turn)", ours, base)
        name = "raw sqlite3 doing a turn's work on our schema, the floor"
        self.raw.add(name, floor, base)

    async def flatness(self) -> None:
        long = self.long
        for kind in ("sqlite", "jsonl"):
            first: dict[int, list[float]] = {}
            again: dict[int, list[float]] = {}
            unhinted: dict[int, list[float]] = {}
            for count in (1_000, long):
                where = await self.history(kind, count)
                first[count], again[count], unhinted[count] = [], [], []
                async with await open_kind(kind, where) as store:
                    context = store.load_context
                    for _ in range(self.rounds):
                        # Without the JSONL hint left beside the files,
                        # the first call searches the history's bytes, as
                        # after a new compaction; with it, as a new process
                        # finds it after the first.
                        shutil.rmtree(where / HINTS, ignore_errors=True)
                        forget(store)
                        unhinted[count].append(await aper_call(lambda: context("s"), 1))  # noqa: B023
                        forget(store)
                        first[count].append(await aper_call(lambda: context("s"), 1))  # noqa: B023
                        again[count].append(await aper_call(lambda: context("s"), 200))  # noqa: B023
            self.flat.add(f"{kind}, {long:,} entries, first call", first[long], first[1_000])
            self.flat.add(f"{kind}, {long:,} entries, asked again", again[long], again[1_000])
            if kind == "jsonl":
                self.flat.add(
                    f"{kind}, {long:,} entries, first call after a new compaction",
                    unhinted[long],
                    unhinted[1_000],
                )

    async def forks(self) -> None:
        """Forks at the middle entry of a session of 1,000 entries and of the
        longest history: time and bytes per fork, flat on SQLite, against
        the one row a fork writes, by hand; JSONL copies, for contrast."""
        forks = 50 if self.quick else 200  # per round, on SQLite
        times, size, rows = await self.sqlite_forks(forks)
        path = await self.history("sqlite", self.long)
        raw_times, raw_size = raw_forks(path, self.long, self.rounds, forks)
        long = f"{self.long:,}"
        self.raw.add(f"fork at an entry of {long} (per fork)", times[self.long], raw_times)
        sessions, entries = rows
        self.raw.add(
            f"bytes per fork ({sessions:g} row, {entries:g} entries), vs the raw row",
            [size[self.long]],
            [raw_size],
            unit="bytes",
        )
        self.forked.add(f"sqlite, {long} entries (per fork)", times[self.long], times[1_000])
        self.forked.add(
            f"sqlite, {long} entries, bytes added per fork",
            [size[self.long]],
            [size[1_000]],
            unit="bytes",
        )
        await fork_chains(self.chained, self.fresh, self.rounds)
        if inspect.isabstract(JsonlStore):
            print("\n(jsonl forks skipped: this JsonlStore does not implement forks yet)")
            return
        for count in (1_000, self.long):
            times[count], size[count] = await self.jsonl_forks(count, 2)
        self.forked.add(
            f"jsonl, {long} entries (per fork), a copy by design", times[self.long], times[1_000]
        )
        self.forked.add(
            f"jsonl, {long} entries, bytes added per fork",
            [size[self.long]],
            [size[1_000]],
            unit="bytes",
        )

    async def sqlite_forks(
        self, forks: int
    ) -> tuple[dict[int, list[float]], dict[int, float], tuple[float, float]]:
        """For 1,000 entries and the longest history: seconds per fork of each
        round and bytes added per fork; and the sessions and entries rows
        added per fork to the longest. The two sizes take turns, round by
        round, so that a busy moment of the machine falls on both."""
        counts = (1_000, self.long)
        paths = {count: await self.history("sqlite", count) for count in counts}
        size = {count: float(database_bytes(paths[count])) for count in counts}
        rows = database_rows(paths[self.long])
        times: dict[int, list[float]] = {count: [] for count in counts}
        stores = {count: await SqlStore.open(str(paths[count])) for count in counts}
        try:
            for _ in range(self.rounds):
                for count, store in stores.items():
                    fork = partial(store.fork, "s", at=f"e{count // 2}")
                    times[count].append(await aper_call(fork, forks))
        finally:
            for store in stores.values():
                await store.close()
        made = forks * self.rounds
        for count in counts:
            size[count] = (database_bytes(paths[count]) - size[count]) / made
        sessions, entries = (
            (after - was) / made
            for after, was in zip(database_rows(paths[self.long]), rows, strict=True)
        )
        return times, size, (sessions, entries)

    async def jsonl_forks(self, count: int, forks: int) -> tuple[list[float], float]:
        """Seconds per fork of each round, and bytes added per fork."""
        where = await self.history("jsonl", count)
        before = tree_bytes(where)
        async with await open_kind("jsonl", where) as store:
            fork = partial(store.fork, "s", at=f"e{count // 2}")
            times = [await aper_call(fork, forks) for _ in range(self.rounds)]
        return times, (tree_bytes(where) - before) / (forks * self.rounds)

    async def erases(self) -> None:
        """Erasing sessions of `ERASED` entries from a database whose history
        holds 1,000 entries and from the longest, against raw sqlite3
        deleting such a session's rows by hand: an erase costs what the
        session holds, not what the database does."""
        each = 20 if self.quick else 100  # erases per round
        counts = (1_000, self.long)
        paths = {count: await self.history("sqlite", count) for count in counts}
        times: dict[int, list[float]] = {count: [] for count in counts}
        stores = {count: await SqlStore.open(str(paths[count])) for count in counts}
        try:
            for _ in range(self.rounds):
                for count, store in stores.items():
                    doomed = []
                    for _ in range(each):
                        meta = SessionMeta.new()
                        await store.create(meta)
                        await store.append_many(meta.id, [entry(n) for n in range(ERASED)])
                        doomed.append(meta.id)
                    ids = iter(doomed)
                    erase = partial(_erase_next, store, ids)
                    times[count].append(await aper_call(erase, each))
        finally:
            for store in stores.values():
                await store.close()
        bare = raw_erases(self.fresh(), self.rounds, each, promised=False)
        floor = raw_erases(self.fresh(), self.rounds, each, promised=True)
        long = f"{self.long:,}"
        name = f"erase a session of {ERASED} entries beside {long} (per erase)"
        self.raw.add(name, times[self.long], bare)
        self.raw.add(
            f"{name}, vs the same deletes kept as an erase promises", times[self.long], floor
        )
        self.raw.add("raw sqlite3 deletes kept as an erase promises, the floor", floor, bare)
        self.erased.add(f"sqlite, {long} entries (per erase)", times[self.long], times[1_000])

    async def peer_runs(self) -> None:
        peers = find_peers()
        if not peers:
            print("\n(peers skipped: pip install -e '.[bench]' to compare with them)")
            return
        appends = 100 if self.quick else 1000
        texts = [text(n) for n in range(self.size)]
        ours_append = [await store_appends(self.fresh(), 1, appends) for _ in range(self.rounds)]
        path = self.fresh()
        store = await SqlStore.open(str(path))
        await store.create(SessionMeta(id="big"))
        for batch in batches(self.size):
            await store.append_many("big", batch)
        ours_load = [await aper_call(lambda: store.load("big"), 1) for _ in range(self.rounds)]
        await store.close()
        # The floors under a target against a peer: our append's work
        # by hand, and our rows read raw then validated by pydantic itself
        # (the peers hand back the dicts of json.loads, unchecked).
        made = [entry(n) for n in range(appends)]
        append_floor = []
        for _ in range(self.rounds):
            async with await SqlStore.open(str(floor_path := self.fresh())) as floor_store:
                await floor_store.create(SessionMeta(id="s"))
            append_floor.append(raw_schema_appends(floor_path, made))
        with closing(raw_connection(path)) as connection:
            query = "SELECT line FROM entries WHERE session_pk = 1 ORDER BY seq"

            def validated() -> object:
                return [validate_entry(line) for (line,) in connection.execute(query)]

            load_floor = [per_call(validated, 1) for _ in range(self.rounds)]
        for name, peer in peers.items():
            table = Table(f"against {name}", "sessionstore", name.split()[0])
            theirs = [await peer.appends(self.fresh(), texts[:appends]) for _ in range(self.rounds)]
            table.add("append, one writer (per append)", ours_append, theirs)
            floor_name = "our append's work by hand (line, digest, word rows), the floor"
            table.add(floor_name, append_floor, theirs)
            loaded = self.fresh()
            await peer.fill(loaded, texts)
            theirs = [await peer.load(loaded) for _ in range(self.rounds)]
            table.add(f"load {self.size:,} messages", ours_load, theirs)
            table.add("our rows read raw and validated by pydantic, the floor", load_floor, theirs)
            self.peers.append(table)

    async def cold_start(self) -> None:
        """A new process importing sessionstore, as a CLI agent started once per
        turn does, against one importing pydantic's BaseModel; turn about.
        Then a new process reading a context (import, open, `load_context`)
        from the longest history on SQLite and on JSONL, against a raw
        sqlite3 script reading the same tail, with the floors beside them:
        the raw script after pydantic's import and a first model
        (`FIRST_MODEL`), as any program handing back models must, and after
        asyncio's and SQLAlchemy's imports too, as the SQL store must."""
        # Compiled first, as pip installs a package: where bytecode is not
        # written (PYTHONDONTWRITEBYTECODE, set on some machines), every new
        # process would compile sessionstore's sources while pydantic's
        # installed bytecode is there.
        compileall.compile_dir(Path(sessionstore.__file__).parent, quiet=1)
        starts = 5 if self.quick else 10
        ours, theirs, modelled = [], [], []
        for _ in range(starts):
            ours.append(new_process("import sessionstore"))
            theirs.append(new_process("from pydantic import BaseModel"))
            modelled.append(new_process(FIRST_MODEL))
        await command_line(self.work, starts, self.cli)
        self.start.add(f'"import sessionstore" (median of {starts} starts)', ours, theirs)
        self.start.add(
            f'"import sessionstore" (median of {starts} starts), vs pydantic\'s import and a '
            "first model",
            ours,
            modelled,
        )
        stores = {kind: await self.history(kind, self.long) for kind in ("sqlite", "jsonl")}
        raw_script = RAW_TAIL.format(path=str(stores["sqlite"]), after=self.long - KEPT)
        firsts: dict[str, list[float]] = {kind: [] for kind in stores}
        raw, floor, sql_floor = [], [], []
        for _ in range(starts):
            raw.append(new_process(raw_script))
            floor.append(new_process(FIRST_MODEL + raw_script))
            sql_floor.append(new_process("import asyncio, sqlalchemy\n" + FIRST_MODEL + raw_script))
            for kind, where in stores.items():
                firsts[kind].append(new_process(FIRST_CONTEXT.format(target=str(where))))
        long = f"{self.long:,}"
        for kind, times in firsts.items():
            self.first.add(f"{kind}, {long} entries (median of {starts} starts)", times, raw)
        self.first.add(
            "the floor: pydantic's import and a first model, then the raw script", floor, raw
        )
        self.first.add(
            "the floor on SQL: asyncio's and SQLAlchemy's imports too, then the raw script",
            sql_floor,
            raw,
        )


FIRST_MODEL = """\
from pydantic import BaseModel

class Line(BaseModel):
    line: str
"""
"""pydantic's import and a first model class, of one field: the start of any
program that validates with pydantic (its first class builds pydantic's
schema machinery and loads its plugins' entry points)."""

RAW_TAIL = """\
import json, sqlite3
connection = sqlite3.connect({path!r})
query = "SELECT line FROM entries WHERE session_pk = 1 AND seq > ? ORDER BY seq"
tail = [json.loads(line) for (line,) in connection.execute(query, ({after},))]
"""
"""The raw script of a first context: the tail's lines, decoded."""

FIRST_CONTEXT = """\
import asyncio
from sessionstore import open_store

async def main():
    async with open_store({target!r}) as store:
        await store.load_context("s")

asyncio.run(main())
"""
"""sessionstore's script of a first context: import, open, `load_context`."""


def new_process(code: str) -> float:
    """Seconds for this interpreter to start, run ``code`` and exit."""
    return process_seconds([sys.executable, "-c", code])


PARTS = (
    "cold-start",
    "appends",
    "reads",
    "turns",
    "flatness",
    "forks",
    "erases",
    "browse",
    "peers",
    "frameworks",
    "adk",
    "langgraph",
    "postgres",
    "sealed",
    "drivers",
    "effects",
    "size",
    "memory",
    "stalls",
    "collector",
)
"""The parts of a run, in order; ``--only`` picks some."""


async def run(
    quick: bool, only: frozenset[str] = frozenset(PARTS), kept: Path | None = None
) -> list[Table]:
    """The benchmark, once (the parts in ``only``): its tables. ``kept`` is a
    directory the runs share (the browse part's store and the memory part's
    archives, built once)."""
    work = Path(tempfile.mkdtemp(prefix="sessionstore-bench-"))
    bench = Bench(work, quick)
    browsed: list[Table] = []
    framed: list[Table] = []
    adked: list[Table] = []
    graphed: list[Table] = []
    served: list[Table] = []
    sealed_: list[Table] = []
    driven: list[Table] = []
    replays: list[Table] = []
    sized: list[Table] = []
    held: list[Table] = []
    stalled: list[Table] = []
    collected: list[Table] = []
    try:
        if "cold-start" in only:
            await bench.cold_start()
        if "appends" in only:
            await bench.appends(1, 200 if quick else 2000)
            await bench.appends(50, 4 if quick else 40)
        if "reads" in only:
            await bench.reads()
        if "turns" in only:
            await bench.turns()
        if "flatness" in only:
            await bench.flatness()
        if "forks" in only:
            await bench.forks()
        if "erases" in only:
            await bench.erases()
        if "browse" in only:
            browsed = await browse(kept or work, quick, bench.rounds)
        if "peers" in only:
            await bench.peer_runs()
        if "frameworks" in only:
            framed = await frameworks(work, kept or work, quick)
        if "adk" in only:
            adked = await adk_part(work, kept or work, quick)
        if "langgraph" in only:
            graphed = await checkpoints(quick)
        if "postgres" in only:
            served = await postgres(quick, bench.rounds)
        if "sealed" in only:
            sealed_ = await sealed(quick, bench.rounds)
        if "drivers" in only:
            driven = await drivers(quick, bench.rounds)
        if "effects" in only:
            replays = await effects(quick, bench.rounds)
        if "size" in only:
            sized = await size()
        if "memory" in only:
            held = await memory(kept or work, quick)
        if "stalls" in only:
            stalled = await stalls(quick, bench.rounds)
        if "collector" in only:
            collected = await collector(quick, bench.rounds)
    finally:
        shutil.rmtree(work)
    parts = [
        browsed,
        framed,
        adked,
        graphed,
        served,
        sealed_,
        driven,
        replays,
        sized,
        held,
        stalled,
        collected,
    ]
    tables = [*bench.tables(), *(table for part in parts for table in part)]
    return [table for table in tables if table.rows]


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--runs", type=int, default=3, help="runs of the whole benchmark")
    parser.add_argument(
        "--only", action="append", choices=PARTS, help="run this part alone (repeatable)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="where to write the report (default: benchmarks/RESULTS.md, none for --quick "
        "or --only)",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    # A partial run would drop the other tables from the report: it writes none unless told.
    partial_run = args.quick or args.only
    output = args.output or (None if partial_run else Path(__file__).with_name("RESULTS.md"))
    setting = Setting.read()
    print(f"{setting.machine}\n{setting.cpu}, commit {setting.commit}")
    runs, loads = [], []
    kept = Path(tempfile.mkdtemp(prefix="sessionstore-bench-kept-"))
    try:
        for n in range(1, args.runs + 1):
            loads.append(os.getloadavg()[0])
            print(f"\nrun {n} of {args.runs} (load average {loads[-1]:.2f})", flush=True)
            tables = await run(args.quick, frozenset(args.only or PARTS), kept)
            for table in tables:
                table.print()
            runs.append(tables)
    finally:
        shutil.rmtree(kept)
    if args.runs > 1:
        print(f"\n\nmedian ratio of {args.runs} runs, with the times of that run")
        for same in zip(*runs, strict=True):
            Table.combine(list(same)).print(spread=True)
    if output:
        write_report(output, setting, loads, runs)
        print(f"\nwritten to {output}")


if __name__ == "__main__":
    asyncio.run(main())
