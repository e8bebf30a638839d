"""Sealed stores and encrypted archives against raw writers without the keys.

Groups:

* ``heads (sqlite|postgresql)``: a sealed store where Alice's head names
  her session and Bob's his; a raw writer points Alice's head at Bob's
  session: ``insert`` (a new position, the triggers on), ``copy-seal``
  (with the seal of Bob's position copied), ``rewrite`` (triggers off:
  the last position changed in place, its seal kept). ``ok``: `head` and
  `head_history` refuse with a `CorruptSessionError` naming the head;
  ``lost``: Bob's session served as Alice's.
* ``damaged (sqlite)``: one session of a sealed store made unreadable:
  ``header`` or ``entry`` (a row changed), ``wrapped-key`` (its key in the
  keyring changed), ``restored`` (a backup taken before its erase put
  back). ``ok``: `list` skips it, `integrity` names it, a whole export
  exports the others and names it, and `erase` erases it; ``clean``: one
  of them failed with a `SessionStoreError`.
* ``archive``: an encrypted archive (two sessions, their heads, a journal)
  changed without the keys: ``head-line`` (a line added to a head's file),
  ``head-changed``, ``head-file`` (a head's file added), ``tail`` (the
  last lines of a sealed file removed), ``file`` (a sealed file removed),
  ``manifest`` (removed, or a count changed). ``ok``: the import is
  refused naming the file, and the store holds nothing after it;
  ``lost``: it imported.

    nice -n 10 .venv/bin/python scripts/adversarial/sealed.py --trials 10
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from pathlib import Path

from common import Tally, describe, finish, pg_schema

from sessionstore import (
    ArchiveError,
    CorruptSessionError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionStoreError,
    SqlStore,
    generate_key,
)
from sessionstore.archive import export_archive, import_archive

KEY = generate_key()  # a throwaway key, new each run


async def sealed_store(target: str, keyring: str) -> SqlStore:
    return await SqlStore.open(target, keys=KEY, keyring=keyring)


async def build(target: str, keyring: str, rng: random.Random) -> None:
    async with await sealed_store(target, keyring) as store:
        for owner in ("alice", "bob", "carol"):
            await store.create(SessionMeta(id=f"{owner}-1", owner=owner))
            for n in range(rng.randint(2, 6)):
                await store.append(f"{owner}-1", MessageEntry.new(Message.user(f"{owner} {n}")))
            await store.set_head(owner, f"{owner}-1")
        await store.journal("agent").effects.once(lambda: "sent", tool="send", key="k")


def raw_sql(target: str, statements: list[str], *, triggers: bool) -> None:
    if target.startswith("sqlite"):
        path = target.removeprefix("sqlite:///")
        with closing(sqlite3.connect(path, isolation_level=None)) as connection:
            if not triggers:
                names = connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger'"
                ).fetchall()
                for (name,) in names:
                    connection.execute(f'DROP TRIGGER "{name}"')
            for statement in statements:
                connection.execute(statement)
        return
    import psycopg

    conninfo = target.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo) as connection:
        if not triggers:
            connection.execute("SET session_replication_role = replica")
        for statement in statements:
            connection.execute(statement)  # type: ignore[arg-type]


# ---------------------------------------------------------------- heads

HEAD_ATTACKS = ["insert", "copy-seal", "rewrite"]


def head_attack(name: str) -> tuple[list[str], bool]:
    at = "(SELECT at FROM heads WHERE name = 'bob' AND seq = 1)"
    if name == "insert":
        return [
            f"INSERT INTO heads (name, seq, session_id, at) VALUES ('alice', 2, 'bob-1', {at})"
        ], True
    if name == "copy-seal":
        return [
            f"INSERT INTO heads (name, seq, session_id, at) VALUES ('alice', 2, 'bob-1', {at})",
            "INSERT INTO head_seals (name, seq, seal) SELECT 'alice', 2, seal "
            "FROM head_seals WHERE name = 'bob' AND seq = 1",
        ], True
    return [f"UPDATE heads SET session_id = 'bob-1', at = {at} WHERE name = 'alice'"], False


async def head_trial(backend: str, target: str, keyring: str, name: str, tally: Tally) -> None:
    group = f"heads ({backend}) {name}"
    statements, triggers = head_attack(name)
    raw_sql(target, statements, triggers=triggers)
    async with await sealed_store(target, keyring) as store:
        for read in (store.head("alice"), store.head_history("alice")):
            try:
                served = await read
            except CorruptSessionError as exc:
                if "head 'alice'" not in str(exc):
                    tally.add(group, "crash", f"does not name the head: {describe(exc)}")
                    return
                continue
            if "bob-1" in repr(served):
                tally.add(group, "lost", f"Alice's head served {served!r}")
                return
        tally.add(group, "ok")


# ---------------------------------------------------------------- damaged sessions

DAMAGES = ["header", "entry", "wrapped-key", "restored"]


async def damage(target: str, keyring: str, name: str, rng: random.Random) -> None:
    path = target.removeprefix("sqlite:///")
    forged = "x'01" + os.urandom(40).hex() + "'"
    if name == "header":
        statement = f"UPDATE sessions SET header = {forged} WHERE id = 'bob-1'"
        raw_sql(target, [statement], triggers=False)
    elif name == "entry":
        seq = rng.randint(1, 2)
        pk = "(SELECT pk FROM sessions WHERE id = 'bob-1')"
        raw_sql(
            target,
            [f"UPDATE entries SET line = {forged} WHERE session_pk = {pk} AND seq = {seq}"],
            triggers=False,
        )
    elif name == "wrapped-key":
        with closing(sqlite3.connect(keyring, isolation_level=None)) as connection:
            connection.execute(
                "UPDATE sessionstore_keyring_keys SET wrapped = ? WHERE name = 'bob-1'",
                [os.urandom(44)],
            )
    else:
        backup = path + ".backup"
        with closing(sqlite3.connect(path)) as source, closing(sqlite3.connect(backup)) as copy:
            source.backup(copy)
        async with await sealed_store(target, keyring) as store:
            await store.erase("bob-1", reason="before the backup is restored")
        with closing(sqlite3.connect(backup)) as source, closing(sqlite3.connect(path)) as copy:
            source.backup(copy)


async def damaged_trial(target: str, keyring: str, name: str, rng: random.Random, tally: Tally):
    group = f"damaged (sqlite) {name}"
    await damage(target, keyring, name, rng)
    async with await sealed_store(target, keyring) as store:
        try:
            listed = {meta.id for meta in await store.list()}
            faults = await store.integrity()
            try:
                await export_archive(store, target.removeprefix("sqlite:///") + ".archive")
                exported = False
            except ArchiveError as exc:
                exported = "bob-1" in str(exc)
            await store.erase("bob-1", reason="damaged")
            after = await store.integrity()
        except SessionStoreError as exc:
            tally.add(group, "clean", describe(exc))
            return
    named = any("bob-1" in fault for fault in faults)
    if {"alice-1", "carol-1"} <= listed and named and exported and after == []:
        tally.add(group, "ok")
    else:
        detail = f"listed {sorted(listed)}, named {named}, exported {exported}, after {after}"
        tally.add(group, "lost", detail)


# ---------------------------------------------------------------- encrypted archives

ARCHIVE_ATTACKS = ["head-line", "head-changed", "head-file", "tail", "file", "manifest"]


def change_archive(archive: Path, name: str, rng: random.Random) -> None:
    heads = archive / "heads"
    sealed = sorted(archive.rglob("*.sealed"))
    if name == "head-line":
        alice = heads / "alice.jsonl"
        alice.write_bytes(alice.read_bytes() + (heads / "bob.jsonl").read_bytes())
    elif name == "head-changed":
        alice = heads / "alice.jsonl"
        alice.write_bytes(alice.read_bytes().replace(b"alice-1", b"bob-1"))
    elif name == "head-file":
        shutil.copy(heads / "bob.jsonl", heads / "dave.jsonl")
    elif name == "tail":
        victim = rng.choice(sealed)
        lines = victim.read_bytes().splitlines(keepends=True)
        victim.write_bytes(b"".join(lines[: rng.randrange(len(lines))]))
    elif name == "file":
        rng.choice(sealed).unlink()
    elif rng.random() < 0.5:
        (archive / "manifest.txt").unlink()
    else:
        manifest = archive / "manifest.txt"
        lines = manifest.read_text().splitlines(keepends=True)
        number = rng.randrange(1, len(lines) - 1)
        count, rest = lines[number].split(" ", 1)
        lines[number] = f"{int(count) + rng.choice([-1, 1])} {rest}"
        manifest.write_text("".join(lines))


async def archive_trial(scratch: Path, name: str, rng: random.Random, tally: Tally) -> None:
    group = f"archive {name}"
    target, keyring = f"sqlite:///{scratch}/source.db", f"{scratch}/source.db.keys"
    await build(target, keyring, rng)
    archive = scratch / "archive"
    async with await sealed_store(target, keyring) as store:
        await export_archive(store, archive, encrypted=True)
    change_archive(archive, name, rng)
    async with await sealed_store(f"sqlite:///{scratch}/into.db", f"{scratch}/into.keys") as into:
        try:
            await import_archive(into, archive)
        except ArchiveError:
            held = await into.list(), await into.heads(), await into.journals()
            if any(held):
                tally.add(group, "lost", f"refused, but imported in part: {held}")
            else:
                tally.add(group, "ok")
                tally.note(group, "refused, nothing imported")
            return
        tally.add(group, "lost", "imported")


# ---------------------------------------------------------------- the campaign


async def campaign(opts: argparse.Namespace, tally: Tally) -> None:
    backends = [b for b in opts.backends.split(",") if b != "postgresql" or opts.pg_url]
    groups = opts.groups.split(",")
    for number in range(opts.trials):
        rng = random.Random(f"{opts.seed}-{number}")
        with tempfile.TemporaryDirectory(prefix="adv-sealed-") as where:
            scratch = Path(where)
            cases = []
            if "heads" in groups:
                cases += [("heads", backend, name) for backend in backends for name in HEAD_ATTACKS]
            if "damaged" in groups:
                cases += [("damaged", "sqlite", name) for name in DAMAGES]
            if "archive" in groups:
                cases += [("archive", "sqlite", name) for name in ARCHIVE_ATTACKS]
            for n, (group, backend, name) in enumerate(cases):
                root = scratch / str(n)
                root.mkdir()
                keyring = str(root / "s.db.keys")
                if backend == "sqlite":
                    target = f"sqlite:///{root}/s.db"
                else:
                    schema = f"sealed_{opts.seed}_{number}_{n}"
                    target = pg_schema(opts.pg_url, schema)
                try:
                    if group == "archive":
                        await archive_trial(root, name, rng, tally)
                    else:
                        await build(target, keyring, rng)
                        if group == "heads":
                            await head_trial(backend, target, keyring, name, tally)
                        else:
                            await damaged_trial(target, keyring, name, rng, tally)
                except Exception as exc:
                    tally.add(f"{group} ({backend}) {name}", "crash", describe(exc))
                print(".", end="", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=6, help="trials per attack (6)")
    parser.add_argument("--groups", default="heads,damaged,archive")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg-url", default=os.environ.get("SESSIONSTORE_PG_URL"))
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    logging.getLogger("sessionstore").setLevel(logging.ERROR)  # skipped sessions are expected
    print(f"sealed campaign, seed {opts.seed}, {opts.trials} trials per attack")
    tally = Tally(f"sealed.py: {opts.trials} trials per attack, seed {opts.seed}")
    asyncio.run(campaign(opts, tally))
    return finish(tally, opts.output)


if __name__ == "__main__":
    raise SystemExit(main())
