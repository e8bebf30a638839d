"""An erase killed while it moves its bucket's word tokens under a new word
key, or after its commit, leaves the word index whole: the next open
searches as before the erase, or as after it, never half of each; and a
copy of the index taken before a committed erase gives back none of the
erased session's words once the store is opened again."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import sqlalchemy as sa

from sessionstore import SqlStore
from tests.encryption.backups import (
    GUESSES,
    KEY,
    SECRET,
    fill,
    guessed,
    pg_tokens,
    sqlite_tokens,
)
from tests.helpers import WORKERS, ForkServer

ERASER = WORKERS / "word_eraser.py"


async def erase_killed(target: str, ring: str, stop: str) -> None:
    """Erase the victim in another process, killed at ``stop``."""
    async with ForkServer(ERASER) as server:
        run = await server.run(target, ring, KEY, "victim", stop)
        assert await run.readline() == b"ready\n"
        assert await run.readline() == f"{stop}\n".encode()
        run.kill()
        assert await run.wait() == -signal.SIGKILL


async def searched(store: SqlStore) -> tuple[list[str], int]:
    """Who holds the secret, and how many messages hold the living session's word."""
    found = [hit.session_id for hit in await store.search(f"number {SECRET}")]
    return found, len(await store.search("filler", limit=500))


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("stop", ["moved", "committed"])
async def test_an_erase_killed_mid_rekey_or_after_its_commit_leaves_search_whole(
    kind: str, stop: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ring = str(tmp_path / "keys.db")
    target = str(tmp_path / "s.db") if kind == "sqlite" else request.getfixturevalue("pg_url")
    async with await SqlStore.open(target, keys=KEY, keyring=ring) as store:
        await fill(store)
    engine = sa.create_engine(target if kind == "postgresql" else f"sqlite:///{target}")
    try:
        with engine.begin() as conn:  # the copy taken before the erase
            store_id = conn.execute(sa.text("SELECT store_id FROM sealing")).scalar_one()
            if kind == "postgresql":
                conn.execute(sa.text("CREATE TABLE backup AS SELECT * FROM search_vectors"))
        before = sqlite_tokens(Path(target)) if kind == "sqlite" else pg_tokens(engine, "backup")
        await erase_killed(target, ring, stop)
        async with await SqlStore.open(target, keys=KEY, keyring=ring) as store:
            if stop == "moved":  # cut short before its commit: as before it
                assert await searched(store) == (["victim"], 300)
                assert await store.integrity() == []
                await store.erase("victim", reason="asked")  # erasing again ends it
            assert await searched(store) == ([], 300)
            assert await store.integrity() == []
            assert "doomed" not in await store.keyring_report()
        assert guessed(before, ring, store_id, GUESSES) == set()
    finally:
        engine.dispose()
