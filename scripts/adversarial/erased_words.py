"""A backup taken before an erase, against the erased session's words: the
brute force of a sealed store's word index with the current keyring and
master key.

Each trial builds a sealed store (a few sessions of random words, and a
victim whose message holds a secret: an 8-digit passport number), takes a
backup, erases the victim, then brute-forces the backup's word index: each
guess (the secret and 400 numbers around it, every word the store ever
held) is made a token under every key the keyring still holds: as the
store's index key alone, as a word key derived from a session's key, and
as a bucket's word key over each key taken as the index key
(docs/encryption.md, Threat model), and matched against the backup's
tokens. Before the erase the same brute force must find the secret (the
attack works). Outcomes:

* ok: after the erase, no word held by the victim alone is found;
* lost: one is (the erase did not reach the backup's index).

Attacks:

* ``file-copy`` (SQLite): the database file copied with the store closed;
* ``online-backup`` (SQLite): SQLite's backup API while the store is open,
  after appends to the other sessions;
* ``table-copy`` (PostgreSQL): ``CREATE TABLE ... AS SELECT`` of
  ``search_vectors`` in the store's schema (what a ``pg_dump`` holds of it).

    nice -n 10 .venv/bin/python scripts/adversarial/erased_words.py --trials 10
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import random
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing

import sqlalchemy as sa
from common import Tally, describe, finish, pg_schema
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from sessionstore import (
    Message,
    MessageEntry,
    SessionMeta,
    SessionStoreError,
    SqlStore,
    generate_key,
)
from sessionstore.backends.sql.keyring import SqlKeyring
from sessionstore.encryption.keys import MasterKeys
from sessionstore.encryption.sealer import unwrap_key

WORDS = ["alpha", "bravo", "delta", "echo", "hotel", "india", "kilo", "lima", "oscar", "tango"]


class Lost(Exception):
    """What a trial found lost."""


def _text(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=").lower()


def _digest(key: bytes, word: str) -> bytes:
    """A word's keyed hash, as sessionstore's `cipher.token` makes it."""
    return hmac.digest(key, f"word\x00{word}".encode(), hashlib.sha256)[:12]


def _bucket_tokens(index: bytes, word_key: bytes, bucket: int, words: list[str]) -> list[str]:
    """The words' tokens as a bucket's word key makes them: the keyed hash
    under the index key, and 4 zero bytes, one AES block, in unpadded
    URL-safe base64 after the bucket's number."""
    blocks = b"".join(_digest(index, word) + bytes(4) for word in words)
    made = Cipher(algorithms.AES(word_key), modes.ECB()).encryptor().update(blocks)
    return [
        f"{bucket}." + base64.urlsafe_b64encode(made[n : n + 16]).decode().rstrip("=")
        for n in range(0, len(made), 16)
    ]


def brute_force(
    tokens: set[str], keyring: str, store_id: str, key: str, guesses: set[str]
) -> set[str]:
    """The guesses whose token, made under the keys the keyring holds, is in
    ``tokens``: each key as the store's index key alone (the scheme before
    word keys), as a word key derived from a session's key (an earlier
    design), and as a bucket's word key over each key taken as the index
    key, for every bucket the tokens name."""
    keys = MasterKeys(key)
    with closing(SqlKeyring(keyring)) as ring:
        ring.bind(store_id, create=False)
        raws = [unwrap_key(keys, wrapped, "the keyring") for wrapped in ring.all_keys()]
    words = sorted(guesses)
    buckets = {int(token.split(".")[0]) for token in tokens if "." in token}
    found = set()
    for raw in raws:
        for each in (raw, hmac.digest(raw, b"sessionstore/word-tokens", hashlib.sha256)):
            found |= {word for word in words if _text(_digest(each, word)) in tokens}
        for other in raws:
            for bucket in buckets:
                made = _bucket_tokens(raw, other, bucket, words)
                found |= {word for word, token in zip(words, made, strict=True) if token in tokens}
    return found


async def build(store: SqlStore, rng: random.Random, secret: str) -> set[str]:
    """Sessions of random words (enough that SQLite indexes the victim
    at once), and the victim; the words of the victim alone."""
    victim = {secret, f"victim{rng.randrange(10**6)}"}
    await store.create(SessionMeta(id="victim"))
    text = " ".join([*victim, *rng.sample(WORDS, 3)])
    await store.append("victim", MessageEntry.new(Message.user(f"passport {text}")))
    for n in range(rng.randint(2, 5)):
        await store.create(SessionMeta(id=f"s{n}"))
        lines = [" ".join(rng.choices(WORDS, k=6)) + " passport" for _ in range(130)]
        await store.append_many(f"s{n}", [MessageEntry.new(Message.user(line)) for line in lines])
    return victim


def sqlite_tokens(path: str) -> set[str]:
    with closing(sqlite3.connect(path)) as connection:
        return {word for (word,) in connection.execute("SELECT word FROM search_postings")}


def sqlite_store_id(path: str) -> str:
    with closing(sqlite3.connect(path)) as connection:
        return str(connection.execute("SELECT store_id FROM sealing").fetchone()[0])


async def sqlite_trial(name: str, scratch: str, number: int, rng: random.Random) -> str:
    key, secret = generate_key(), f"{rng.randrange(10**7, 10**8)}"
    db, copy, ring = (f"{scratch}/{name}-{number}{end}" for end in (".db", "-copy.db", ".keys"))
    async with await SqlStore.open(db, keys=key, keyring=ring) as store:
        victim = await build(store, rng, secret)
        if name == "online-backup":
            await store.append_many(
                "s0", [MessageEntry.new(Message.user("later words")) for _ in range(300)]
            )
            with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(copy)) as dest:
                source.backup(dest)
    if name == "file-copy":
        shutil.copy(db, copy)
    return await attack(sqlite_tokens(copy), db, ring, sqlite_store_id(copy), key, secret, victim)


async def attack(
    tokens: set[str], target: str, ring: str, store_id: str, key: str, secret: str, victim: set[str]
) -> str:
    guesses = {*victim, *WORDS, "passport", *(str(int(secret) + d) for d in range(-200, 200))}
    if secret not in brute_force(tokens, ring, store_id, key, guesses):
        raise RuntimeError("the brute force finds nothing before the erase: the attack is broken")
    async with await SqlStore.open(target, keys=key, keyring=ring) as store:
        await store.erase("victim", reason="asked")
    found = brute_force(tokens, ring, store_id, key, guesses)
    if found & victim:
        raise Lost(f"the backup gives back the erased session's {sorted(found & victim)}")
    return f"{len(guesses)} guesses x {len(tokens)} tokens: found only {len(found)} others' words"


async def pg_trial(url: str, scratch: str, number: int, rng: random.Random, seed: int) -> str:
    key, secret = generate_key(), f"{rng.randrange(10**7, 10**8)}"
    schema = f"words_{seed}_{number}"
    target = pg_schema(url, schema)
    ring = f"{scratch}/pg-{number}.keys"
    async with await SqlStore.open(target, keys=key, keyring=ring) as store:
        victim = await build(store, rng, secret)
    engine = sa.create_engine(target)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE backup AS SELECT * FROM search_vectors"))
            store_id = conn.execute(sa.text("SELECT store_id FROM sealing")).scalar_one()
            rows = conn.execute(sa.text("SELECT unnest(tsvector_to_array(words)) FROM backup"))
            tokens = {word for (word,) in rows}
    finally:
        engine.dispose()
    try:
        return await attack(tokens, target, ring, store_id, key, secret, victim)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


async def campaign(opts: argparse.Namespace, tally: Tally) -> None:
    with tempfile.TemporaryDirectory(prefix="adv-words-") as scratch:
        groups = [("sqlite", "file-copy"), ("sqlite", "online-backup")]
        if opts.pg_url:
            groups.append(("postgresql", "table-copy"))
        else:
            print("\npostgresql: skipped (give --pg-url or SESSIONSTORE_PG_URL)")
        for backend, name in groups:
            group = f"{backend} {name}"
            print(f"\n{group}: ", end="", flush=True)
            for number in range(opts.trials):
                rng = random.Random(f"{opts.seed}-{name}-{number}")
                try:
                    if backend == "sqlite":
                        said = await sqlite_trial(name, scratch, number, rng)
                    else:
                        said = await pg_trial(opts.pg_url, scratch, number, rng, opts.seed)
                except Lost as exc:
                    tally.add(group, "lost", str(exc))
                except SessionStoreError as exc:
                    tally.add(group, "clean", describe(exc))
                except Exception as exc:
                    tally.add(group, "crash", describe(exc))
                else:
                    tally.note(group, said.split(":")[0])
                    tally.add(group, "ok")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="trials per attack (8)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("SESSIONSTORE_PG_URL"),
        help="a PostgreSQL server (else $SESSIONSTORE_PG_URL; else SQLite only)",
    )
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--output", help="also write the report to this file")
    opts = parser.parse_args()
    print(f"erased words campaign, seed {opts.seed}, {opts.trials} trials per attack")
    tally = Tally(f"erased_words.py: {opts.trials} trials per attack, seed {opts.seed}")
    asyncio.run(campaign(opts, tally))
    return finish(tally, opts.output)


if __name__ == "__main__":
    raise SystemExit(main())
