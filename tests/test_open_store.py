"""open_store: from a target string to a backend, awaited or as a context."""

import asyncio
import warnings
from pathlib import Path

import pytest

from sessionstore import (
    ConfigurationError,
    JsonlStore,
    MemoryStore,
    SessionMeta,
    StorageError,
    open_store,
)


async def test_memory_target_gives_a_fresh_memory_store() -> None:
    first = await open_store("memory://")
    second = await open_store("memory://")
    assert isinstance(first, MemoryStore)
    await first.create(SessionMeta(id="s1"))
    assert await second.list() == []


async def test_directory_path_and_jsonl_url_give_a_jsonl_store(tmp_path: Path) -> None:
    for target in (tmp_path, str(tmp_path), f"jsonl://{tmp_path}"):
        store = await open_store(target)
        assert isinstance(store, JsonlStore)
        assert store.directory == tmp_path


async def test_options_reach_the_backend(tmp_path: Path) -> None:
    store = await open_store(tmp_path, durability="full")
    assert isinstance(store, JsonlStore)
    with pytest.raises(ConfigurationError, match="durability"):
        await open_store(tmp_path, durability="never")
    with pytest.raises(ConfigurationError, match="colour"):
        await open_store(tmp_path, colour="blue")
    with pytest.raises(ConfigurationError, match="no options"):
        await open_store("memory://", durability="full")


async def test_async_with_opens_and_closes(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await store.create(SessionMeta(id="s1"))
    with pytest.raises(StorageError, match="closed"):
        await store.list()


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("redis://localhost", "unknown store scheme 'redis'"),
        ("jsonl://relative/dir", "absolute path"),
    ],
)
async def test_unknown_or_malformed_targets_are_refused(target: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        await open_store(target)


async def test_a_file_is_not_a_session_directory(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("x")
    with pytest.raises(ConfigurationError, match="is a file"):
        await open_store(path)


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_open_store_is_a_coroutine_asyncio_run_takes(tmp_path: Path, kind: str) -> None:
    target = {"memory": "memory://", "jsonl": str(tmp_path / "j"), "sqlite": str(tmp_path / "s.db")}
    store = asyncio.run(open_store(target[kind]))  # a script's one-liner
    try:
        session_id = asyncio.run(store.create(SessionMeta.new()))
        assert asyncio.run(store.load(session_id)) == []
    finally:
        asyncio.run(store.close())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an opening never run warns of nothing
        open_store("memory://")
