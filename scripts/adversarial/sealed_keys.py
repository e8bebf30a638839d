"""Raw writers and stale workers against a sealed store's keys: no session
of another lost, none stranded by a rotation.

Each trial builds a sealed store (a few sessions of a few messages, their
keyring beside them), attacks it, then opens it as a user would and reads
every session that should be there. Outcomes:

* ok: the attack was refused with a clean error, or went through and every
  session that should read still reads, with the keys it should need;
* clean: a clean error where the store should have carried on;
* lost: a session that should read no longer does (its key destroyed, or
  wrapped under a key the user was told to drop), or a wrong answer.

Attacks (docs/encryption.md, Threat model):

* ``swap-headers``: raw SQL swaps two sessions' headers (or copies one over
  another), then erases one of them; the store is opened again (the sweep of
  doomed keys), the headers put back: every session but one erased must read;
* ``doom-living`` (SQLite keyring): raw SQL marks a living session's key
  doomed, and moves another session's header onto it; the next open must not
  destroy a key an erasure does not name;
* ``stale-worker``: a store open with the old key alone creates sessions in a
  loop while another rotates to a new key; then the old key is dropped:
  every session the worker was told it created reads with the new key alone;
* ``wrong-order``: ``keys rotate`` with the keys in a wrong order (the new key
  second; after a rotation, the retired key first): refused, naming the
  order, with nothing changed;
* ``masters-dropped`` (SQLite keyring): raw SQL deletes the keyring's record
  of its current master key (as a keyring of an older sessionstore), then a
  rotation and a stale worker as above.

    nice -n 10 .venv/bin/python scripts/adversarial/sealed_keys.py --trials 10
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import sqlite3
import tempfile
import time
from contextlib import closing, redirect_stderr, redirect_stdout
from pathlib import Path

from common import Tally, describe, finish, pg_schema

from sessionstore import (
    EncryptionKeyError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionStoreError,
    SqlStore,
    generate_key,
)
from sessionstore.cli import main as cli_main

SESSIONS = 5


class Lost(Exception):
    """What a trial found lost."""


async def build(target: str, keyring: str, key: str, rng: random.Random) -> dict[str, int]:
    """Sessions of a few messages; how many each holds."""
    sizes = {}
    async with await SqlStore.open(target, keys=key, keyring=keyring) as store:
        for n in range(SESSIONS):
            session_id = f"s{n}"
            await store.create(SessionMeta(id=session_id, title=f"title {n}"))
            size = rng.randint(1, 4)
            entries = [MessageEntry.new(Message.user(f"{session_id} {k}")) for k in range(size)]
            await store.append_many(session_id, entries)
            sizes[session_id] = size
    return sizes


async def reads(target: str, keyring: str, keys: list[str], sizes: dict[str, int]) -> None:
    """Every session of ``sizes`` reads whole with ``keys``, and no other is there.

    Raises:
        Lost: one does not (any error here is a session lost: its key
            destroyed, or wrapped by a key the user was told to drop).
    """
    try:
        async with await SqlStore.open(target, keys=keys, keyring=keyring) as store:
            held = {meta.id for meta in await store.list()}
            if held != set(sizes):
                raise Lost(f"the store holds {sorted(held)}, not {sorted(sizes)}")
            for session_id, size in sizes.items():
                entries = await store.load(session_id)
                if len(entries) != size:
                    raise Lost(f"{session_id} holds {len(entries)} entries, not {size}")
    except SessionStoreError as exc:
        raise Lost(f"no longer reads: {describe(exc)}") from None


def sqlite_path(target: str) -> str:
    return target.removeprefix("sqlite:///")


def swap_headers(db: str, one: str, other: str, *, copy: bool) -> None:
    """Raw SQL, triggers dropped: ``other``'s header put in ``one``'s row (and
    ``one``'s in ``other``'s, unless ``copy``)."""
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("DROP TRIGGER IF EXISTS sessions_no_update")
        headers = dict(connection.execute("SELECT id, header FROM sessions").fetchall())
        pairs = [(one, other)] if copy else [(one, other), (other, one)]
        for row, moved in pairs:
            connection.execute("UPDATE sessions SET header = ? WHERE id = ?", [headers[moved], row])


def put_back(db: str, saved: dict[str, bytes]) -> None:
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        for session_id, header in saved.items():
            connection.execute("UPDATE sessions SET header = ? WHERE id = ?", [header, session_id])


def headers(db: str) -> dict[str, bytes]:
    with closing(sqlite3.connect(db)) as connection:
        return dict(connection.execute("SELECT id, header FROM sessions").fetchall())


async def swap_then_erase(target: str, keyring: str, key: str, rng: random.Random) -> str:
    sizes = await build(target, keyring, key, rng)
    one, other = rng.sample(sorted(sizes), 2)
    copy = rng.random() < 0.5
    db = sqlite_path(target)
    saved = headers(db)
    swap_headers(db, one, other, copy=copy)
    erased = rng.choice([one, other])
    said = "went through"
    async with await SqlStore.open(target, keys=key, keyring=keyring) as store:
        try:
            await store.erase(erased, reason="asked")
        except SessionStoreError as exc:
            said = f"refused: {type(exc).__name__}"
        else:
            sizes.pop(erased)
            saved.pop(erased)
    async with await SqlStore.open(target, keys=key, keyring=keyring):
        pass  # the open that sweeps doomed keys
    put_back(db, saved)
    await reads(target, keyring, [key], sizes)
    return f"{'copied' if copy else 'swapped'}, erase {said}"


async def doom_living(target: str, keyring: str, key: str, rng: random.Random) -> str:
    sizes = await build(target, keyring, key, rng)
    victim, other = rng.sample(sorted(sizes), 2)
    async with await SqlStore.open(target, keys=key, keyring=keyring) as store:
        found = await store.data_key("session", victim)
        assert found is not None
    with closing(sqlite3.connect(keyring, isolation_level=None)) as connection:
        connection.execute(
            "UPDATE sessionstore_keyring_keys SET doomed = 1 WHERE key_id = ?", [found.key_id]
        )
    db = sqlite_path(target)
    saved = headers(db)
    swap_headers(db, victim, other, copy=True)  # the victim no longer names its key
    async with await SqlStore.open(target, keys=key, keyring=keyring):
        pass  # the sweep
    put_back(db, saved)
    await reads(target, keyring, [key], sizes)
    return "doomed key kept"


async def stale_worker(
    target: str, keyring: str, key: str, rng: random.Random, *, drop_masters: bool = False
) -> str:
    sizes = await build(target, keyring, key, rng)
    if drop_masters:
        with closing(sqlite3.connect(keyring, isolation_level=None)) as connection:
            connection.execute("DELETE FROM sessionstore_keyring_masters")
    new = generate_key()
    rotated = asyncio.Event()
    refused = ""

    async def worker() -> None:
        nonlocal refused
        async with await SqlStore.open(target, keys=key, keyring=keyring) as store:
            n, after = 0, 0
            while after < 3:
                after += rotated.is_set()
                session_id = f"w{n}"
                try:
                    await store.create(SessionMeta(id=session_id))
                except EncryptionKeyError as exc:
                    refused = str(exc)
                    return
                sizes[session_id] = 0  # created: it must read with the new key alone
                n += 1
                await asyncio.sleep(0)

    async def rotate() -> None:
        await asyncio.sleep(rng.uniform(0.0, 0.2))
        async with await SqlStore.open(target, keys=[new, key], keyring=keyring) as store:
            await store.rotate_keys()
        rotated.set()

    await asyncio.gather(worker(), rotate())
    await reads(target, keyring, [new], sizes)  # the old key dropped
    if not refused:
        raise Lost("the worker on the old key went on creating sessions after the rotation")
    return "worker refused after the rotation"


def cli(*args: str) -> tuple[int, str, str]:
    """The command line run with ``args``: its exit status, what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli_main(list(args))
    return status, out.getvalue(), err.getvalue()


async def wrong_order(target: str, keyring: str, key: str, rng: random.Random) -> str:
    sizes = await build(target, keyring, key, rng)
    new = generate_key()
    scratch = Path(tempfile.mkdtemp(prefix="adv-keys-"))
    wrong, right = scratch / "wrong.key", scratch / "right.key"
    wrong.write_text(f"{key}\n{new}\n")
    right.write_text(f"{new}\n{key}\n")
    options = ["--db", target, "--keyring", keyring]
    rotated_first = rng.random() < 0.5
    if rotated_first:  # then the retired key listed first
        status, _, err = await asyncio.to_thread(
            cli, *options, "--key-file", str(right), "keys", "rotate"
        )
        if status:
            raise Lost(f"a rotation in the right order failed: {err.strip()}")
    status, out, err = await asyncio.to_thread(
        cli, *options, "--key-file", str(wrong), "keys", "rotate"
    )
    if status == 0:
        raise Lost(f"keys rotate with the keys in the wrong order exited 0: {out.strip()}")
    if "newest first" not in err:
        raise Lost(f"keys rotate refused the wrong order without naming it: {err.strip()}")
    await reads(target, keyring, [new] if rotated_first else [key], sizes)  # nothing changed
    return "refused" + (" (retired key first)" if rotated_first else " (new key second)")


ATTACKS = {
    "sqlite": ["swap-headers", "doom-living", "stale-worker", "wrong-order", "masters-dropped"],
    "postgresql": ["stale-worker", "wrong-order"],
}


async def trial(name: str, target: str, keyring: str, rng: random.Random) -> str:
    key = generate_key()
    if name == "swap-headers":
        return await swap_then_erase(target, keyring, key, rng)
    if name == "doom-living":
        return await doom_living(target, keyring, key, rng)
    if name == "stale-worker":
        return await stale_worker(target, keyring, key, rng)
    if name == "masters-dropped":
        return await stale_worker(target, keyring, key, rng, drop_masters=True)
    if name == "wrong-order":
        return await wrong_order(target, keyring, key, rng)
    raise ValueError(name)


async def campaign(opts: argparse.Namespace, tally: Tally) -> None:
    with tempfile.TemporaryDirectory(prefix="adv-keys-") as scratch:
        for backend in opts.backends.split(","):
            if backend == "postgresql" and not opts.pg_url:
                print("\npostgresql: skipped (give --pg-url or SESSIONSTORE_PG_URL)")
                continue
            print(f"\n{backend}: ", end="", flush=True)
            for name in ATTACKS[backend]:
                group = f"{backend} {name}"
                for number in range(opts.trials):
                    rng = random.Random(f"{opts.seed}-{backend}-{name}-{number}")
                    keyring = f"{scratch}/{backend}-{name}-{number}.keys"
                    if backend == "sqlite":
                        target = f"sqlite:///{scratch}/{name}-{number}.db"
                    else:
                        schema = f"keys_{opts.seed}_{name.replace('-', '_')}_{number}"
                        target = pg_schema(opts.pg_url, schema)
                    try:
                        said = await trial(name, target, keyring, rng)
                    except Lost as exc:
                        tally.add(group, "lost", str(exc))
                    except SessionStoreError as exc:
                        tally.add(group, "clean", describe(exc))
                    except Exception as exc:
                        tally.add(group, "crash", describe(exc))
                    else:
                        tally.note(group, said)
                        tally.add(group, "ok")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="trials per attack (8)")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("SESSIONSTORE_PG_URL"),
        help="a PostgreSQL server (else $SESSIONSTORE_PG_URL; else SQLite only)",
    )
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    print(f"sealed keys campaign, seed {opts.seed}, {opts.trials} trials per attack")
    tally = Tally(f"sealed_keys.py: {opts.trials} trials per attack, seed {opts.seed}")
    asyncio.run(campaign(opts, tally))
    return finish(tally, opts.output)


if __name__ == "__main__":
    raise SystemExit(main())
