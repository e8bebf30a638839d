"""Raw writers against the SQL stores: every attack refused, or named by verify.

A writer with SQL access to the database (and, for the second half, the
right to drop or disable the append-only triggers) tries to remove or
change history unseen. Each trial builds a small store, anchors it
(``verify_store(store, anchors=[])``), attacks one random target, then asks
``integrity()`` and ``verify_store`` with the anchors. Outcomes:

* ok: the database refused the attack, or verify named it;
* lost: the attack went through and verify said nothing.

Attacks (docs/sql.md, "Anchors: what a raw writer cannot hide", gives the
table they test):

* ``reuse-erasure`` (SQLite): name the newest erasure in ``erasing`` again
  once its id is in use again, and delete that session;
* ``forged-erasure``: record an erasure naming a session, then delete its
  last entries only;
* ``cut-tail``, ``drop-session``, ``drop-erasures``: triggers dropped (SQLite)
  or disabled (PostgreSQL ``session_replication_role = replica``), delete
  a session's last entries, a whole session, or erasure records;
* ``rewrite`` (SQLite): triggers dropped, rewrite a line and every digest
  after it;
* ``word-index``: add, change or delete a row of the word index;
* ``head-gap``, ``title-gap``: triggers off, delete an earlier position.

    nice -n 10 .venv/bin/python scripts/adversarial/tamper.py --trials 10
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable
from contextlib import closing

from common import Tally, describe, finish, pg_cluster, pg_schema

from sessionstore import SessionMeta, SessionStore, encode, open_store
from sessionstore.backends.sql.digests import ENTRY_COLUMNS, entry_digest
from sessionstore.backends.sql.wordindex import BACKLOG
from sessionstore.testing.contract import message
from sessionstore.verify import verify_store

SESSIONS = 6

Raw = Callable[[list[str]], None]  # runs statements in one transaction, raising if refused


async def build(target: str, rng: random.Random) -> dict[str, int]:
    """Sessions of a few entries (one past the word index's backlog), titles,
    a head, an erasure; how many entries each session holds."""
    sizes = {}
    async with await open_store(target) as store:
        for n in range(SESSIONS):
            session_id = f"s{n}"
            await store.create(SessionMeta(id=session_id))
            size = rng.randint(2, 8) if n else BACKLOG + 4
            entries = [message(f"{session_id}-{k}", f"word{k} {rng.random()}") for k in range(size)]
            await store.append_many(session_id, entries)
            await store.set_title(session_id, "first")
            await store.set_title(session_id, "second")
            await store.set_title(session_id, "third")
            sizes[session_id] = size
        for n in range(3):
            await store.set_head("main", f"s{n}")
        await store.create(SessionMeta(id="gone"))
        await store.erase("gone", reason="before the attack")
    return sizes


def sqlite_raw(target: str, *, triggers: bool) -> Raw:
    path = target.removeprefix("sqlite:///")

    def run(statements: list[str]) -> None:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection:
            if not triggers:
                names = connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger'"
                ).fetchall()
                for (name,) in names:
                    connection.execute(f'DROP TRIGGER "{name}"')
            connection.execute("BEGIN")
            try:
                for statement in statements:
                    connection.execute(statement)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise

    return run


def postgresql_raw(target: str, *, triggers: bool) -> Raw:
    import psycopg

    conninfo = target.replace("postgresql+psycopg://", "postgresql://", 1)

    def run(statements: list[str]) -> None:
        with psycopg.connect(conninfo) as connection:
            if not triggers:
                connection.execute("SET session_replication_role = replica")
            for statement in statements:
                connection.execute(statement)  # type: ignore[arg-type]

    return run


def of(session_id: str) -> str:
    return f"(SELECT pk FROM sessions WHERE id = '{session_id}')"


def attack(name: str, backend: str, target: str, rng: random.Random, sizes: dict[str, int]):
    """The statements of one attack, and whether they run with the triggers."""
    victim = rng.choice(sorted(sizes))
    pk = of(victim)
    last = sizes[victim]
    cut = rng.randint(1, last - 1)
    forged = (
        "INSERT INTO erasures (kind, name, at, reason, lines, digest) "
        f"VALUES ('session', '{victim}', '2026-01-01T00:00:00Z', 'forged', 0, 'x')"
    )
    beside = [f"DELETE FROM {t} WHERE session_pk = {pk}" for t in ("titles", "listing", "activity")]
    words = "search_postings" if backend == "sqlite" else "search_vectors"
    if name == "reuse-erasure":
        return (
            True,
            [
                "INSERT INTO erasing SELECT max(seq) FROM erasures",
                *beside,
                f"DELETE FROM entries WHERE session_pk = {pk}",
                f"DELETE FROM sessions WHERE id = '{victim}'",
                "DELETE FROM erasing",
            ],
            victim,
        )
    if name == "forged-erasure":
        statements = [forged]
        if backend == "sqlite":
            statements.append("INSERT INTO erasing SELECT max(seq) FROM erasures")
        statements.append(f"DELETE FROM entries WHERE session_pk = {pk} AND seq > {last - cut}")
        if backend == "sqlite" and rng.random() < 0.5:
            statements.append("DELETE FROM erasing")  # tries to close it too
        return True, statements, victim
    if name == "cut-tail":
        return (
            False,
            [f"DELETE FROM entries WHERE session_pk = {pk} AND seq > {last - cut}"],
            victim,
        )
    if name == "drop-session":
        return (
            False,
            [
                *beside,
                f"DELETE FROM {words} WHERE session_pk = {pk}",
                f"DELETE FROM entries WHERE session_pk = {pk}",
                f"DELETE FROM sessions WHERE id = '{victim}'",
            ],
            victim,
        )
    if name == "drop-erasures":
        spent = ["DELETE FROM erasures_spent"] if backend == "sqlite" else []
        return False, [*spent, "DELETE FROM erasures"], victim
    if name == "word-index":  # s0: the session whose messages are indexed
        victim, pk = "s0", of("s0")
        seq = rng.randint(1, BACKLOG)
        if backend == "sqlite":
            change = rng.choice(
                [
                    # A word on the first message of one of its batches (the
                    # packing: sessionstore/backends/sql/postings.py).
                    "INSERT INTO search_postings SELECT 'planted', session_pk, batch, x'00' "
                    f"FROM search_postings WHERE session_pk = {pk} AND word = '' "
                    "ORDER BY random() LIMIT 1",
                    f"DELETE FROM search_postings WHERE session_pk = {pk} AND word = ("
                    f"SELECT word FROM search_postings WHERE session_pk = {pk} AND word <> '' "
                    "ORDER BY random() LIMIT 1)",
                    # The lengths of each batch end with a length again.
                    "UPDATE search_postings SET postings = postings || x'00' "
                    f"WHERE session_pk = {pk} AND word = ''",
                ]
            )
        else:
            change = rng.choice(
                [
                    "UPDATE search_vectors SET words = words || 'planted'::tsvector "
                    f"WHERE session_pk = {pk} AND seq = {seq}",
                    f"DELETE FROM search_vectors WHERE session_pk = {pk} AND seq = {seq}",
                    f"UPDATE search_vectors SET length = length + 1 WHERE session_pk = {pk}",
                ]
            )
        return True, [change], victim
    if name == "head-gap":
        return (
            False,
            [f"DELETE FROM heads WHERE name = 'main' AND seq = {rng.randint(1, 2)}"],
            "main",
        )
    if name == "title-gap":
        return False, [f"DELETE FROM titles WHERE session_pk = {pk} AND seq = 1"], victim
    raise ValueError(name)


def rewrite(target: str, rng: random.Random, sizes: dict[str, int]) -> str:
    """SQLite, triggers dropped: a line rewritten, every digest after it too."""
    victim = rng.choice(sorted(sizes))
    seq = rng.randint(1, sizes[victim])
    path = target.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'entries_%'"
        ).fetchall():
            connection.execute(f'DROP TRIGGER "{name}"')
        rows = connection.execute(
            f"SELECT seq, {', '.join(ENTRY_COLUMNS)}, digest FROM entries "
            f"WHERE session_pk = {of(victim)} ORDER BY seq"
        ).fetchall()
        previous = bytes(rows[seq - 2][-1]) if seq > 1 else None
        if previous is None:
            (previous,) = connection.execute(
                f"SELECT digest FROM sessions WHERE id = '{victim}'"
            ).fetchone()
        digest = bytes(previous)
        for row in rows[seq - 1 :]:
            columns = dict(zip(ENTRY_COLUMNS, row[1:-1], strict=True))
            if row[0] == seq:
                forged = message(columns["entry_id"], "rewritten")
                columns.update(line=encode(forged), timestamp=forged.timestamp)
            digest = entry_digest(digest, columns)
            connection.execute(
                "UPDATE entries SET line = ?, timestamp = ?, digest = ? "
                f"WHERE session_pk = {of(victim)} AND seq = ?",
                (columns["line"], columns["timestamp"], digest, row[0]),
            )
    return victim


async def seen(target: str, anchors) -> list[str]:
    """What verify says now: faults of integrity() and of the anchors."""
    async with await open_store(target) as store:
        report = await verify_store(store, anchors=anchors)
    return report.faults


ATTACKS = {
    "sqlite": [
        "reuse-erasure",
        "forged-erasure",
        "cut-tail",
        "drop-session",
        "drop-erasures",
        "rewrite",
        "word-index",
        "head-gap",
        "title-gap",
    ],
    "postgresql": [
        "forged-erasure",
        "cut-tail",
        "drop-session",
        "drop-erasures",
        "word-index",
        "head-gap",
        "title-gap",
    ],
}


async def trial(backend: str, target: str, name: str, rng: random.Random, tally: Tally) -> None:
    group = f"{backend} {name}"
    sizes = await build(target, rng)
    store: SessionStore
    async with await open_store(target) as store:
        anchors = (await verify_store(store, anchors=[])).anchors
    raw_of = sqlite_raw if backend == "sqlite" else postgresql_raw
    try:
        if name == "rewrite":
            victim = rewrite(target, rng, sizes)
        else:
            triggers, statements, victim = attack(name, backend, target, rng, sizes)
            raw_of(target, triggers=triggers)(statements)
    except Exception:  # the database refused it
        tally.note(group, "refused by the database")
        tally.add(group, "ok")
        return
    faults = await seen(target, anchors)
    if faults:
        tally.note(group, "named by verify")
        tally.add(group, "ok")
    else:
        tally.add(group, "lost", f"{victim}: went through, and verify said ok")


async def campaign(opts: argparse.Namespace, tally: Tally) -> None:
    with tempfile.TemporaryDirectory(prefix="adv-tamper-") as scratch:
        for backend in opts.backends.split(","):
            print(f"\n{backend}: ", end="", flush=True)
            with (
                pg_cluster(opts.pg_url, "/tmp/pg/adv-tamper")
                if backend == "postgresql"
                else (_none()) as (url, _)
            ):
                for name in ATTACKS[backend]:
                    for number in range(opts.trials):
                        rng = random.Random(f"{opts.seed}-{backend}-{name}-{number}")
                        if backend == "sqlite":
                            target = f"sqlite:///{scratch}/{name}-{number}.db"
                        else:
                            target = pg_schema(
                                url, f"tamper_{opts.seed}_{name.replace('-', '_')}_{number}"
                            )
                        try:
                            await trial(backend, target, name, rng, tally)
                        except Exception as exc:
                            tally.add(f"{backend} {name}", "crash", describe(exc))


class _none:
    def __enter__(self) -> tuple[None, None]:
        return None, None

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=6, help="trials per attack (6)")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg-url", help="a PostgreSQL server to use (else a throwaway one)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    print(f"tamper campaign, seed {opts.seed}, {opts.trials} trials per attack")
    tally = Tally(f"tamper.py: {opts.trials} trials per attack, seed {opts.seed}")
    asyncio.run(campaign(opts, tally))
    return finish(tally, opts.output)


if __name__ == "__main__":
    raise SystemExit(main())
