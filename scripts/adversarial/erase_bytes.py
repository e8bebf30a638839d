"""Erasure campaign on PostgreSQL: after erasures and the procedure docs/sql.md
gives ("Where the bytes go"), search every file of the database, and
``pg_wal``, for the bytes of what was erased.

Each trial fills a schema of its own with 3 to 7 sessions (random entries,
some forks) and 1 to 3 journals, each carrying unique markers: a message's
text, a long line of random text (kept in TOAST), an entry id, a title and
renamed titles, an owner, a tag, a metadata value, journal lines. Some
statistics are gathered (``ANALYZE``, as autovacuum would) or a plain
``VACUUM`` runs, at random. Then it erases some of the sessions (forks
first where they share rows) and journals, and runs the procedure. Groups:

* ``quiet``: nothing else is connected;
* ``reader``: a ``REPEATABLE READ`` transaction, its snapshot taken before
  the erase, stays open for 0 to 3 s into the procedure, which must wait
  for it;
* ``writer``: another store object appends to the sessions kept while the
  procedure runs (its ``VACUUM FULL`` locks them out for a while).

A trial is ``lost`` when a marker of what was erased is in any file of the
database (or of ``pg_wal`` when the server unlinks old segments,
``wal_recycle = off``), when a marker of what was kept is in none (the
search would prove nothing), when a session or journal kept, or an append
that returned, is not read back as written, or when `integrity()` names a
fault.

By default it starts a throwaway cluster of its own (``.ci/postgres``, in
``/tmp/adv-erase-pg``) and sets ``wal_recycle = off`` there; ``--pg-url``
names a server instead (a superuser's URL: the files are read through
`pg_read_binary_file`), whose settings are left alone: ``pg_wal`` is
searched only when it already runs with ``wal_recycle = off``.

Usage: python scripts/adversarial/erase_bytes.py [--trials 8] [--groups quiet,reader,writer]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter

import psycopg
from common import Tally, Trial, attempt, finish, pg_cluster, pg_schema, random_entry

from sessionstore import (
    Message,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    SqlStore,
    encode,
)

TIMEOUT = 120.0
CLUSTER = "/tmp/adv-erase-pg"

# The procedure of docs/sql.md, "Where the bytes go", PostgreSQL.
TABLES = "sessions, entries, titles, listing, activity, search_vectors, journal_lines"
# ANALYZE leaves the statistics of a table it finds empty as they were.
FORGET = (
    "DELETE FROM pg_statistic WHERE starelid IN"
    " (SELECT oid FROM pg_class WHERE relnamespace = current_schema()::regnamespace)"
)
REWRITE = [f"VACUUM FULL {TABLES}", FORGET, f"ANALYZE {TABLES}"]
STATISTICS = ["VACUUM FULL pg_statistic"]
WAL = ["SELECT pg_switch_wal()", "CHECKPOINT"]
OLDER = (
    "SELECT pid, xact_start, state FROM pg_stat_activity"
    " WHERE xact_start < %(t)s AND pid <> pg_backend_pid()"
    " AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"
)

FIND = """
SELECT d.dir || '/' || f, m.key
FROM (
    SELECT 'base/' || oid AS dir FROM pg_database WHERE datname = current_database()
    UNION ALL SELECT 'pg_wal' WHERE %(wal)s
) d,
LATERAL pg_ls_dir(d.dir) f,
LATERAL pg_stat_file(d.dir || '/' || f, true) s,
LATERAL pg_read_binary_file(d.dir || '/' || f, 0, s.size, true) b,
LATERAL jsonb_each_text(%(markers)s::jsonb) m
WHERE NOT s.isdir AND s.size > 0 AND position(convert_to(m.value, 'UTF8') IN b) > 0
"""


def conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def mark(kind: str) -> str:
    return f"{kind}{uuid.uuid4().hex}"


def wait_for_older(connection: psycopg.Connection, moment, timeout: float = 60.0) -> bool:
    """Whether every transaction begun before ``moment`` ended in time."""
    deadline = time.monotonic() + timeout
    while connection.execute(OLDER, {"t": moment}).fetchall():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def procedure(url: str) -> str:
    """Run the documented procedure; "" or what went wrong."""
    with psycopg.connect(conninfo(url), autocommit=True) as connection:
        moment = connection.execute("SELECT clock_timestamp()").fetchone()[0]
        if not wait_for_older(connection, moment):
            return "a transaction older than the erase stayed open"
        for statement in REWRITE:
            connection.execute(statement)
        moment = connection.execute("SELECT clock_timestamp()").fetchone()[0]
        if not wait_for_older(connection, moment):
            return "a transaction older than ANALYZE stayed open"
        for statement in STATISTICS + WAL:
            connection.execute(statement)
    return ""


def holding(url: str, markers: dict[str, str], *, wal: bool) -> dict[str, set[str]]:
    """For each marker found after a checkpoint, the files holding it."""
    found: dict[str, set[str]] = {}
    with psycopg.connect(conninfo(url), autocommit=True) as connection:
        connection.execute("CHECKPOINT")
        for path, key in connection.execute(FIND, {"markers": json.dumps(markers), "wal": wal}):
            found.setdefault(key, set()).add(f"{path} ({relation(connection, path)})")
    return found


def relation(connection: psycopg.Connection, path: str) -> str:
    if not path.startswith("base/"):
        return "WAL"
    filenode = int(path.rsplit("/", 1)[1].split("_")[0].split(".")[0])
    row = connection.execute(
        "SELECT pg_filenode_relation(0, %s::oid)::regclass::text", (filenode,)
    ).fetchone()
    return row[0] if row and row[0] else "?"


# ---------------------------------------------------------------- a trial


class Content:
    """What a trial wrote: markers per session and journal, entries' lines."""

    def __init__(self) -> None:
        self.markers: dict[str, dict[str, str]] = {}  # session or "journal:name" -> markers
        self.lines: dict[str, list[tuple[str, str]]] = {}  # session -> (entry id, line)
        self.journals: dict[str, list[bytes]] = {}
        self.forks: dict[str, str] = {}  # fork -> source

    def marked(self, owner: str, kind: str) -> str:
        value = mark(kind)
        self.markers.setdefault(owner, {})[f"{owner}/{kind}"] = value
        return value


async def fill(store: SqlStore, rng: random.Random, content: Content) -> None:
    for n in range(rng.randint(3, 7)):
        session_id = f"s{n}"
        source = rng.choice(list(content.lines)) if content.lines and rng.random() < 0.3 else None
        meta = SessionMeta(
            id=session_id,
            title=content.marked(session_id, "title") if rng.random() < 0.8 else None,
            owner=content.marked(session_id, "owner") if rng.random() < 0.8 else None,
            tags=(content.marked(session_id, "tag"),) if rng.random() < 0.6 else (),
            metadata={"note": content.marked(session_id, "meta")} if rng.random() < 0.6 else {},
        )
        if source is not None:
            at = rng.randrange(len(content.lines[source]))
            await store.fork(source, at=content.lines[source][at][0], meta=meta)
            content.forks[session_id] = source
            content.lines[session_id] = list(content.lines[source][: at + 1])
        else:
            await store.create(meta)
            content.lines[session_id] = []
        entries = [
            random_entry(rng, rng.randint(1, 4000), f"e{n}-{k}", [])
            for k in range(rng.randint(1, 30))
        ]
        text = content.marked(session_id, "text")
        entries.insert(
            rng.randint(0, len(entries)),
            MessageEntry(
                id=content.marked(session_id, "entry"),
                timestamp="2026-01-01T00:00:00Z",
                message=Message(role="user", content=f"say {text} now"),
            ),
        )
        if rng.random() < 0.5:
            noise = [base64.b64encode(rng.randbytes(3000)).decode() for _ in range(2)]
            long = Message(role="assistant", content=content.marked(session_id, "long").join(noise))
            entries.append(
                MessageEntry(id=f"long{n}", timestamp="2026-01-01T00:00:00Z", message=long)
            )
        await store.append_many(session_id, entries)
        content.lines[session_id] += [(entry.id, encode(entry)) for entry in entries]
        for k in range(rng.randint(0, 3)):
            await store.set_title(session_id, content.marked(session_id, f"retitle{k}"))
    for n in range(rng.randint(1, 3)):
        name = f"j{n}"
        lines = [
            content.marked(f"journal:{name}", f"line{k}").encode() for k in range(rng.randint(1, 5))
        ]
        for line in lines:
            await store.journal(name).append_raw(line)
        content.journals[name] = lines


def erasable_order(content: Content, doomed: set[str]) -> list[str]:
    """``doomed`` closed over forks (a session goes only after its forks), forks first."""
    closed = set(doomed)
    grew = True
    while grew:
        grew = False
        for fork, source in content.forks.items():
            if source in closed and fork not in closed:
                closed.add(fork)
                grew = True
    order: list[str] = []
    while len(order) < len(closed):
        for session_id in sorted(closed - set(order)):
            if not any(f not in order for f, s in content.forks.items() if s == session_id):
                order.append(session_id)
    return order


async def run_trial(
    group: str, url: str, rng: random.Random, check_wal: bool, trial: Trial, counts: dict[str, int]
) -> None:
    content = Content()
    store = await SqlStore.open(url)
    other = None
    reader = None
    try:
        if not trial.step(await attempt(fill(store, rng, content), TIMEOUT), "fill"):
            return
        with psycopg.connect(conninfo(url), autocommit=True) as connection:
            roll = rng.random()
            if roll < 0.4:
                connection.execute(f"ANALYZE {TABLES}")
            elif roll < 0.6:
                connection.execute(f"VACUUM {TABLES}")
        doomed = erasable_order(content, set(rng.sample(sorted(content.lines), rng.randint(1, 3))))
        gone_journals = rng.sample(sorted(content.journals), rng.randint(0, len(content.journals)))
        if group == "reader":
            reader = psycopg.connect(conninfo(url))
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            reader.execute("SELECT count(*) FROM entries")
        for session_id in doomed:
            if not trial.step(
                await attempt(store.erase(session_id, reason="adv"), TIMEOUT), f"erase {session_id}"
            ):
                return
        for name in gone_journals:
            if not trial.step(
                await attempt(store.journal(name).erase(reason="adv"), TIMEOUT),
                f"erase journal {name}",
            ):
                return
        if reader is not None:
            holder = reader
            threading.Timer(rng.uniform(0, 3), holder.close).start()
        kept = [s for s in content.lines if s not in doomed]
        appended: dict[str, list[tuple[str, str]]] = {s: [] for s in kept}
        done = asyncio.Event()

        async def write() -> None:
            nonlocal other
            other = await SqlStore.open(url)
            n = 0
            while not done.is_set() and kept:
                session_id = rng.choice(kept)
                entry = MessageEntry(
                    id=f"w{n}",
                    timestamp="2026-01-01T00:00:00Z",
                    message=Message(role="user", content=f"w{n}"),
                )
                await other.append(session_id, entry)
                appended[session_id].append((entry.id, encode(entry)))
                n += 1
                await asyncio.sleep(0.01)

        writer = asyncio.create_task(write()) if group == "writer" else None
        ran = await attempt(asyncio.to_thread(procedure, url), TIMEOUT)
        done.set()
        if writer is not None:
            trial.step(await attempt(writer, TIMEOUT), "writer")
        if not trial.step(ran, "procedure"):
            return
        if ran[1]:
            trial.see("hang", ran[1])
            return

        erased = {k: v for s in doomed for k, v in content.markers.get(s, {}).items()}
        erased |= {k: v for j in gone_journals for k, v in content.markers[f"journal:{j}"].items()}
        left = {k: v for s in kept for k, v in content.markers.get(s, {}).items()}
        left |= {
            k: v
            for j in content.journals
            if j not in gone_journals
            for k, v in content.markers[f"journal:{j}"].items()
        }
        found = holding(url, erased, wal=check_wal)
        for key, files in sorted(found.items()):
            trial.see("lost", f"erased {key} still in {', '.join(sorted(files))}")
        seen = holding(url, left, wal=False)
        for key in sorted(set(left) - set(seen)):
            trial.see("lost", f"kept {key} in no file")
        for session_id in kept:
            ran = await attempt(lines_of(store, session_id), TIMEOUT)
            if trial.step(ran, f"raw_lines {session_id}"):
                want = [line for _, line in content.lines[session_id] + appended[session_id]]
                if ran[1] != want:
                    trial.see(
                        "lost", f"{session_id}: {len(ran[1])} lines read, {len(want)} written"
                    )
        for session_id in doomed:
            try:
                await store.load(session_id)
                trial.see("lost", f"erased {session_id} still loads")
            except SessionNotFoundError:
                pass
        for name, lines in content.journals.items():
            if name not in gone_journals:
                ran = await attempt(store.journal(name).read_bytes(), TIMEOUT)
                if trial.step(ran, f"journal {name}") and ran[1] != b"".join(
                    line + b"\n" for line in lines
                ):
                    trial.see("lost", f"journal {name} changed")
        ran = await attempt(store.integrity(), TIMEOUT)
        if trial.step(ran, "integrity") and ran[1]:
            trial.see("lost", f"integrity: {ran[1][:3]}")
        counts["sessions erased"] += len(doomed)
        counts["journals erased"] += len(gone_journals)
        counts["erased markers searched"] += len(erased)
        counts["kept markers found"] += len(seen)
        counts["appends during the procedure"] += sum(map(len, appended.values()))
    finally:
        if reader is not None and not reader.closed:
            reader.close()
        if other is not None:
            await other.close()
        await store.close()


async def lines_of(store: SqlStore, session_id: str) -> list[str]:
    """A session's entries' lines, its header left out."""
    return [line async for line in store.raw_lines(session_id)][1:]


def drop(url: str, schema: str) -> None:
    with psycopg.connect(conninfo(url), autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="trials per group")
    parser.add_argument("--groups", default="quiet,reader,writer")
    parser.add_argument(
        "--pg-url", default=None, help="a superuser's URL (default: a cluster of its own)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    with pg_cluster(opts.pg_url, CLUSTER) as (url, own):
        with psycopg.connect(conninfo(url), autocommit=True) as connection:
            if own is not None:
                connection.execute("ALTER SYSTEM SET wal_recycle = off")
                connection.execute("SELECT pg_reload_conf()")
                time.sleep(1)  # the checkpointer reads it on the signal
            check_wal = connection.execute("SHOW wal_recycle").fetchone() == ("off",)
        where = "pg_wal searched" if check_wal else "pg_wal not searched (wal_recycle = on)"
        tally = Tally(f"erase_bytes.py: {opts.trials} trials per group, seed {seed}, {where}")
        print(f"erasure campaign (seed {seed}); {where}")
        for group in opts.groups.split(","):
            print(f"\n{group}: ", end="", flush=True)
            for _ in range(opts.trials):
                schema = f"adv_erase_{uuid.uuid4().hex[:12]}"
                target = pg_schema(url, schema)
                trial = Trial()
                counts: Counter[str] = Counter()
                try:
                    seeded = random.Random(rng.randrange(1 << 30))
                    asyncio.run(run_trial(group, target, seeded, check_wal, trial, counts))
                except Exception as exc:  # the campaign's own failure: say where
                    trial.see("crash", f"{type(exc).__name__}: {exc}"[:300])
                finally:
                    drop(url, schema)
                tally.add(group, trial.outcome, trial.summary())
                for what, amount in counts.items():
                    if amount:
                        tally.note(group, what, amount)
    return finish(tally, opts.output)


if __name__ == "__main__":
    sys.exit(main())
