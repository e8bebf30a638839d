"""What the erased-words tests share: a secret, its guesses, a store
holding it, and the tokens a copy of the index gives back."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

import sqlalchemy as sa

from sessionstore import Message, MessageEntry, SessionMeta, SqlStore
from sessionstore.backends.sql.keyring import SqlKeyring
from sessionstore.encryption import cipher
from sessionstore.encryption.cipher import WordKey
from sessionstore.encryption.keys import MasterKeys
from sessionstore.encryption.sealer import unwrap_key
from tests.kinds import TEST_KEYS

KEY = TEST_KEYS[0]
SECRET = "p48213977"  # a passport number
GUESSES = [
    SECRET,
    "passport",
    "number",
    "filler",
    "kept",
    *(f"p{n}" for n in range(48213900, 48214100)),
]


def guessed(tokens: set[str], ring: str, store_id: str, guesses: Iterable[str]) -> set[str]:
    """The brute force: each guess's token made under every key the keyring
    still holds for the store, as the index key alone (the scheme before
    word keys), and as the index key with each key as a word key, matched
    against the tokens a copy of the index holds."""
    with closing(SqlKeyring(ring)) as keyring:
        assert keyring.bind(store_id, create=False)
        raws = [unwrap_key(MasterKeys(KEY), found, "keyring") for found in keyring.all_keys()]
    words = list(guesses)
    buckets = {int(token.split(".")[0]) for token in tokens if "." in token}  # told by tokens
    found = set()
    for index in raws:
        digests = [cipher.digest(index, "word", word) for word in words]
        found |= {word for word in words if cipher.token(index, "word", word) in tokens}
        for raw in raws:
            for bucket in buckets:
                made = WordKey(b"", raw, bucket).tokens(digests)
                found |= {word for word, token in zip(words, made, strict=True) if token in tokens}
    return found


async def fill(store: SqlStore) -> None:
    """The victim's message, then enough others (in its bucket) that SQLite
    indexes it."""
    await store.create(SessionMeta(id="victim"))
    await store.append("victim", MessageEntry.new(Message.user(f"passport number {SECRET}")))
    await store.create(SessionMeta(id="kept"))
    await store.append_many(
        "kept", [MessageEntry.new(Message.user(f"kept filler {n}")) for n in range(300)]
    )


def sqlite_tokens(db: Path) -> set[str]:
    with closing(sqlite3.connect(db)) as connection:
        return {word for (word,) in connection.execute("SELECT word FROM search_postings")}


def sqlite_store_id(db: Path) -> str:
    with closing(sqlite3.connect(db)) as connection:
        return str(connection.execute("SELECT store_id FROM sealing").fetchone()[0])


def pg_tokens(engine: sa.Engine, table: str) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT unnest(tsvector_to_array(words)) FROM {table}"))
        return {word for (word,) in rows}
