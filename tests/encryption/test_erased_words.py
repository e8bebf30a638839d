"""An erase reaches old copies of the word index: a copy of the database
taken before it, with the keyring and master key of after it, gives back
none of the erased session's words, however they are guessed
(docs/encryption.md, Threat model); and a store sealed before word keys
is converted at its first open."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sessionstore import EncryptionKeyError, Message, MessageEntry, SessionMeta, SqlStore
from sessionstore.backends.sql import wordconvert, wordkeys
from sessionstore.backends.sql.keyring import SqlKeyring
from sessionstore.encryption import cipher
from tests.encryption.backups import (
    GUESSES,
    KEY,
    SECRET,
    fill,
    guessed,
    pg_tokens,
    sqlite_store_id,
    sqlite_tokens,
)


async def test_a_sqlite_copy_taken_before_an_erase_gives_back_none_of_its_words(
    tmp_path: Path,
) -> None:
    db, copy, ring = tmp_path / "s.db", tmp_path / "copy.db", str(tmp_path / "s.db.keys")
    async with await SqlStore.open(str(db), keys=KEY) as store:
        await fill(store)
        assert [hit.session_id for hit in await store.search(SECRET)] == ["victim"]
    shutil.copy(db, copy)  # checkpointed at close: the file holds it all
    # Before the erase the brute force works: the attack is a real one.
    assert guessed(sqlite_tokens(copy), ring, sqlite_store_id(copy), GUESSES) >= {SECRET, "filler"}
    async with await SqlStore.open(str(db), keys=KEY) as store:
        await store.erase("victim", reason="asked")
        assert await store.search(SECRET) == []
        assert len(await store.search("filler", limit=500)) == 300
        assert await store.integrity() == []
    assert guessed(sqlite_tokens(copy), ring, sqlite_store_id(copy), GUESSES) == set()
    # The living session's words are found in the store itself, as always.
    assert guessed(sqlite_tokens(db), ring, sqlite_store_id(db), GUESSES) == {"kept", "filler"}


async def test_a_postgresql_copy_taken_before_an_erase_gives_back_none_of_its_words(
    pg_url: str, tmp_path: Path
) -> None:
    ring = str(tmp_path / "keys.db")
    engine = sa.create_engine(pg_url)
    try:
        async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:
            await fill(store)
        with engine.begin() as conn:  # the backup: a copy of the index's table
            conn.execute(sa.text("CREATE TABLE backup AS SELECT * FROM search_vectors"))
            store_id = conn.execute(sa.text("SELECT store_id FROM sealing")).scalar_one()
        assert SECRET in guessed(pg_tokens(engine, "backup"), ring, store_id, GUESSES)
        async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:
            await store.erase("victim", reason="asked")
            assert await store.search(SECRET) == []
            assert len(await store.search("filler", limit=500)) == 300
            assert await store.integrity() == []
        assert guessed(pg_tokens(engine, "backup"), ring, store_id, GUESSES) == set()
        found = guessed(pg_tokens(engine, "search_vectors"), ring, store_id, GUESSES)
        assert found == {"kept", "filler"}
    finally:
        engine.dispose()


def old_scheme(patch: pytest.MonkeyPatch) -> None:
    """Index as sessionstore did before word keys: each word's token its
    hash under the index key alone, no word key, no mark of conversion."""

    def sealed(self: wordkeys.Tokens, pk: int, hits: Mapping[str, int]) -> dict[str, int]:
        index = self._sealer._index
        return {cipher.token(index, "word", word): count for word, count in hits.items()}

    patch.setattr(wordkeys.Tokens, "sealed", sealed)
    patch.setattr(wordkeys, "mark_converted", lambda conn: None)


async def test_a_sqlite_store_sealed_before_word_keys_is_converted_at_its_first_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, copy, ring = tmp_path / "s.db", tmp_path / "copy.db", str(tmp_path / "s.db.keys")
    with monkeypatch.context() as patch:
        old_scheme(patch)
        async with await SqlStore.open(str(db), keys=KEY) as store:
            await fill(store)
    assert SECRET in guessed(sqlite_tokens(db), ring, sqlite_store_id(db), [SECRET])
    async with await SqlStore.open(str(db), keys=KEY) as store:  # converted
        assert [hit.session_id for hit in await store.search(f"number {SECRET}")] == ["victim"]
        assert len(await store.search("filler", limit=500)) == 300
        assert await store.integrity() == []
    shutil.copy(db, copy)
    async with await SqlStore.open(str(db), keys=KEY) as store:
        await store.erase("victim", reason="asked")
    assert guessed(sqlite_tokens(copy), ring, sqlite_store_id(copy), GUESSES) == set()


async def test_a_conversion_killed_midway_goes_on_at_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "s.db"
    monkeypatch.setattr(wordkeys, "BUCKET", 2)  # victim, kept and others in three buckets
    with monkeypatch.context() as patch:
        old_scheme(patch)
        async with await SqlStore.open(str(db), keys=KEY) as store:
            for n in range(4):
                await store.create(SessionMeta(id=f"other{n}"))
                await store.append(f"other{n}", MessageEntry.new(Message.user(f"other {n}")))
            await fill(store)
    converted = wordconvert._convert_chunk
    chunks: list[object] = []

    def killed(conn: sa.Connection, **given: Any) -> object:
        if chunks:
            raise KeyboardInterrupt  # as a kill during the second transaction
        chunks.append(converted(conn, **given))
        return chunks[-1]

    monkeypatch.setattr(wordconvert, "CHUNK", 10)
    with monkeypatch.context() as patch:
        patch.setattr(wordconvert, "_convert_chunk", killed)
        with pytest.raises(KeyboardInterrupt):
            await SqlStore.open(str(db), keys=KEY)
    moved = {"." in token for token in sqlite_tokens(db) if token}
    assert moved == {True, False}  # some rows moved, some not yet
    async with await SqlStore.open(str(db), keys=KEY) as store:  # goes on
        assert [hit.session_id for hit in await store.search(SECRET)] == ["victim"]
        assert [hit.session_id for hit in await store.search("other 3")] == ["other3"]
        assert len(await store.search("filler", limit=500)) == 300
        assert await store.integrity() == []
    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute("SELECT bucket FROM word_keys ORDER BY bucket").fetchall()
    assert rows == [(wordkeys.CONVERTED,), (0,), (1,), (2,), (3,)]
    assert {"." in token for token in sqlite_tokens(db) if token} == {True}


async def test_a_postgresql_store_sealed_before_word_keys_is_converted_at_its_first_open(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring = str(tmp_path / "keys.db")
    engine = sa.create_engine(pg_url)
    try:
        with monkeypatch.context() as patch:
            old_scheme(patch)
            async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:
                await fill(store)
        with engine.begin() as conn:
            store_id = conn.execute(sa.text("SELECT store_id FROM sealing")).scalar_one()
        assert SECRET in guessed(pg_tokens(engine, "search_vectors"), ring, store_id, [SECRET])
        async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:  # converted
            assert [hit.session_id for hit in await store.search(f"number {SECRET}")] == ["victim"]
            assert len(await store.search("filler", limit=500)) == 300
            assert await store.integrity() == []
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE backup AS SELECT * FROM search_vectors"))
        async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:
            await store.erase("victim", reason="asked")
        assert guessed(pg_tokens(engine, "backup"), ring, store_id, GUESSES) == set()
    finally:
        engine.dispose()


async def test_a_word_key_gone_from_the_keyring_is_a_fault_integrity_names(
    tmp_path: Path,
) -> None:
    db, ring = tmp_path / "s.db", str(tmp_path / "s.db.keys")
    async with await SqlStore.open(str(db), keys=KEY) as store:
        await fill(store)
    with closing(SqlKeyring(ring)) as keyring:  # deleted behind the store's back
        assert keyring.bind(sqlite_store_id(db), create=False)
        (word_key,) = [found for found in keyring.all_keys() if found.scope == "words"]
        keyring.destroy(word_key.key_id)
    async with await SqlStore.open(str(db), keys=KEY) as store:
        faults = await store.integrity()
        assert any(f"holds no word key {word_key.key_id.hex()} of bucket 0" in f for f in faults)
        with pytest.raises(EncryptionKeyError, match="holds no word key"):
            await store.search(SECRET)


async def test_a_postgresql_search_an_erase_in_its_bucket_overtakes_finds_what_is_left(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each statement of a PostgreSQL read is a snapshot of its own (SQLite's
    # read transaction is one): the erase commits between the search's read
    # of the word keys and its read of the index.
    ring, target = str(tmp_path / "keys.db"), pg_url
    keys_of = wordkeys.keys_of
    raced: list[str] = []

    async def erase_elsewhere() -> None:
        async with await SqlStore.open(target, keys=KEY, keyring=ring) as other:
            await other.erase("victim", reason="asked")

    def overtaken(*args: Any, **given: Any) -> Any:
        if not raced:  # the search read the word keys: an erase commits now
            raced.append("erased")
            done = threading.Thread(target=asyncio.run, args=(erase_elsewhere(),))
            done.start()
            done.join()
        return keys_of(*args, **given)

    async with await SqlStore.open(target, keys=KEY, keyring=ring) as store:
        await fill(store)
        assert len(await store.search("filler", limit=500)) == 300  # its word key is kept
        monkeypatch.setattr(wordkeys, "keys_of", overtaken)
        assert len(await store.search("filler", limit=500)) == 300
        assert raced == ["erased"]
        assert await store.search(SECRET) == []


async def test_postgresql_appends_racing_erases_in_their_bucket_keep_every_word_findable(
    pg_url: str, tmp_path: Path
) -> None:
    # Two stores, two writers at once: an append's transaction holds its
    # bucket's key row shared, an erase's re-key holds it for update.
    ring = str(tmp_path / "keys.db")
    async with (
        await SqlStore.open(pg_url, keys=KEY, keyring=ring) as writer,
        await SqlStore.open(pg_url, keys=KEY, keyring=ring) as eraser,
    ):
        await writer.create(SessionMeta(id="kept"))
        for n in range(8):
            await writer.create(SessionMeta(id=f"gone{n}"))
            await writer.append(f"gone{n}", MessageEntry.new(Message.user(f"gone filler {n}")))

        async def appends() -> None:
            for n in range(120):
                await writer.append("kept", MessageEntry.new(Message.user(f"kept filler {n}")))

        async def erases() -> None:
            for n in range(8):
                await eraser.erase(f"gone{n}", reason="asked")

        await asyncio.gather(appends(), erases())
        assert len(await writer.search("kept filler", limit=500)) == 120
        assert len(await eraser.search("filler", limit=500)) == 120
        assert await writer.integrity() == []


async def test_a_postgresql_conversion_killed_midway_goes_on_at_the_next_open(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring = str(tmp_path / "keys.db")
    monkeypatch.setattr(wordkeys, "BUCKET", 2)  # victim, kept and others in three buckets
    with monkeypatch.context() as patch:
        old_scheme(patch)
        async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:
            for n in range(4):
                await store.create(SessionMeta(id=f"other{n}"))
                await store.append(f"other{n}", MessageEntry.new(Message.user(f"other {n}")))
            await fill(store)
    converted = wordconvert._convert_bucket
    buckets: list[int] = []

    def killed(conn: sa.Connection, **given: Any) -> None:
        if buckets:
            raise KeyboardInterrupt  # as a kill during the second bucket's transaction
        buckets.append(given["bucket"])
        converted(conn, **given)

    with monkeypatch.context() as patch:
        patch.setattr(wordconvert, "_convert_bucket", killed)
        with pytest.raises(KeyboardInterrupt):
            await SqlStore.open(pg_url, keys=KEY, keyring=ring)
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:  # the first bucket moved, the others not yet
        assert conn.execute(sa.text("SELECT bucket FROM word_keys")).all() == [(0,)]
    engine.dispose()
    async with await SqlStore.open(pg_url, keys=KEY, keyring=ring) as store:  # goes on
        assert [hit.session_id for hit in await store.search(SECRET)] == ["victim"]
        assert [hit.session_id for hit in await store.search("other 3")] == ["other3"]
        assert len(await store.search("filler", limit=500)) == 300
        assert await store.integrity() == []
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT bucket FROM word_keys ORDER BY bucket")).all()
        assert [bucket for (bucket,) in rows] == [wordkeys.CONVERTED, 0, 1, 2, 3]
        assert {"." in token for token in pg_tokens(engine, "search_vectors")} == {True}
    finally:
        engine.dispose()
