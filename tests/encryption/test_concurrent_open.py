"""Workers opening a new sealed store at once all open it, sealed by one
store id, its keyring made once (docs/encryption.md, The keyring)."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

from sessionstore import SessionMeta, SqlStore
from tests.kinds import TEST_KEYS

WORKERS = 8


def _open_at_once(target: str, keyring: str | None, start: Any, said: Any, n: int) -> None:
    async def main() -> None:
        store = await SqlStore.open(target, keys=TEST_KEYS, keyring=keyring)
        async with store:
            await store.create(SessionMeta(id=f"w{n}"))

    start.wait()
    try:
        asyncio.run(main())
        said.put((n, "ok"))
    except Exception as exc:  # what each worker met, for the assertion
        said.put((n, f"{type(exc).__name__}: {exc}"))


def opened_at_once(target: str, keyring: str | None) -> list[str]:
    """What each of `WORKERS` processes met opening ``target`` at once."""
    context = multiprocessing.get_context("fork")
    start, said = context.Barrier(WORKERS), context.Queue()
    workers = [
        context.Process(target=_open_at_once, args=(target, keyring, start, said, n))
        for n in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    results = dict(said.get() for _ in workers)
    for worker in workers:
        worker.join()
    return [results[n] for n in range(WORKERS)]


async def check_one_sealed_store(target: str, keyring: str | None) -> None:
    async with await SqlStore.open(target, keys=TEST_KEYS, keyring=keyring) as store:
        assert sorted(meta.id for meta in await store.list()) == [f"w{n}" for n in range(WORKERS)]
        assert await store.integrity() == []


def test_workers_opening_a_new_sealed_postgresql_store_at_once_all_open_it(
    pg_url: str, keyring_database: str
) -> None:
    assert opened_at_once(pg_url, keyring_database) == ["ok"] * WORKERS
    asyncio.run(check_one_sealed_store(pg_url, keyring_database))


def test_workers_opening_a_new_sealed_sqlite_store_at_once_all_open_it(tmp_path: Path) -> None:
    target = str(tmp_path / "s.db")
    assert opened_at_once(target, None) == ["ok"] * WORKERS
    asyncio.run(check_one_sealed_store(target, None))
