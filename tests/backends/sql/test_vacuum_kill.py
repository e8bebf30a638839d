"""A SQLite vacuum killed with SIGKILL at random moments loses nothing.

A real process vacuums a store of many sessions, most of them erased, and
is killed several times: during the incremental steps, and during the full
VACUUM that converts a file made before incremental auto_vacuum. After
each kill the database passes its integrity checks and every kept session
reads back byte for byte; a last run completes, and the file is smaller.
"""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import SessionMeta, SessionStore, open_store
from sessionstore.testing.common import message, raw
from tests.helpers import WORKERS, ForkServer, killed_run

VACUUMER = WORKERS / "vacuumer.py"
SESSIONS = 60
KILLS = 6


async def fill(db: Path) -> None:
    async with open_store(db) as store:
        for n in range(SESSIONS):
            await store.create(SessionMeta(id=f"s{n}"))
            lines = [message(f"s{n}-{i}", f"{n}:{i} " * 400) for i in range(36)]
            await store.append_many(f"s{n}", lines)


async def erase_most(db: Path) -> dict[str, list[str]]:
    """Erase all but every sixth session; what the kept ones hold."""
    async with open_store(db) as store:
        for n in range(SESSIONS):
            if n % 6:
                await store.erase(f"s{n}", reason="retention")
        return await contents(store)


async def contents(store: SessionStore) -> dict[str, list[str]]:
    return {meta.id: await raw(store, meta.id) for meta in await store.list()}


def file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())


def make_old(db: Path) -> None:
    """A file made before incremental auto_vacuum, its WAL empty."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA auto_vacuum=NONE")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def run_time(server: ForkServer, db: Path) -> float:
    """Seconds a run takes from its ``ready`` to its end, unkilled, on a copy of ``db``."""
    copy = db.with_name("copy.db")
    shutil.copyfile(db, copy)
    run = await server.run(str(copy))
    assert await run.readline() == b"ready\n"
    started = time.perf_counter()
    assert (await run.read()).endswith(b"ok\n")
    return time.perf_counter() - started


async def check_whole(db: Path, kept: dict[str, list[str]], seed: int) -> None:
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], seed
    async with open_store(db) as store:
        assert await store.integrity() == [], seed
        assert await contents(store) == kept, seed


@pytest.mark.parametrize("old", [False, True], ids=["incremental", "converted"])
async def test_vacuum_killed_at_random_moments_loses_nothing(tmp_path: Path, old: bool) -> None:
    db = tmp_path / "s.db"
    await fill(db)
    if old:
        make_old(db)
    kept = await erase_most(db)
    before = file_bytes(db)
    seed = random.randrange(1 << 32)
    chance = random.Random(seed)
    killed = 0
    async with ForkServer(VACUUMER) as server:
        # The full VACUUM is one statement: killed at a moment within its run.
        window = await run_time(server, db) if old else 0.0
        for _ in range(KILLS):
            if old:
                printed = await killed_run(server, [str(db)], window)
                killed += "ok" not in printed
            else:  # killed after some steps
                run = await server.run(str(db))
                assert await run.readline() == b"ready\n"
                for _ in range(chance.randrange(0, 30)):
                    if not (await run.readline()).strip().isdigit():
                        break
                run.kill()
                killed += await run.wait() == -signal.SIGKILL
            await check_whole(db, kept, seed)
            if old:
                make_old(db)  # a file to convert again, for the next kill
        printed = await killed_run(server, [str(db)], None)
    assert printed[-1] == "ok", (seed, printed)
    assert killed >= 2, f"seed {seed}: the kills did not land mid-run"
    await check_whole(db, kept, seed)
    assert file_bytes(db) < before / 2, seed
