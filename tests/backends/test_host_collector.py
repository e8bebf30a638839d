"""A store never touches the host's garbage collector.

The collector is process-wide: switching it off for a large read, even
briefly, would switch it off for every thread of the application. Its
passes during a large load are a cost the store pays like any other
Python code (docs/stores.md, "What a store keeps in memory").
"""

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionstore import JsonlStore, MemoryStore, SessionMeta, SessionStore, SqlStore
from sessionstore.testing.contract import message

ENTRIES = 20_000
SESSIONS = 2_000


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations of the collector's passes, as they start."""
    started: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        yield started
    finally:
        gc.callbacks.remove(seen)


async def _filled(kind: str, where: Path) -> SessionStore:
    store: SessionStore
    if kind == "sqlite":
        store = await SqlStore.open(str(where / "s.db"))
    elif kind == "jsonl":
        store = JsonlStore(where / "dir")
    else:
        store = MemoryStore()
    await store.create(SessionMeta(id="big"))
    for start in range(0, ENTRIES, 1_000):
        await store.append_many("big", [message(f"e{n}", "x") for n in range(start, start + 1_000)])
    for n in range(SESSIONS):
        await store.create(SessionMeta(id=f"s{n}"))
    return store


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
async def test_a_large_load_and_list_leave_the_collector_running(
    kind: str, tmp_path: Path, collections: list[int]
) -> None:
    store = await _filled(kind, tmp_path)
    thresholds = gc.get_threshold()
    watched: list[bool] = []
    done = threading.Event()

    def watch() -> None:  # another thread of the application
        while not done.is_set():
            watched.append(gc.isenabled() and gc.get_threshold() == thresholds)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        store.drop_caches()
        collections.clear()
        assert len(await store.load("big")) == ENTRIES
        during_load = list(collections)
        collections.clear()
        assert len(await store.list()) == SESSIONS + 1
        during_list = list(collections)
    finally:
        done.set()
        watcher.join()
        await store.close()
    # The collector ran its passes while the store built its records, as it
    # does for any code allocating that much; nobody saw it off.
    assert during_load
    assert during_list
    assert watched
    assert all(watched)
    assert gc.isenabled()
    assert gc.get_threshold() == thresholds
