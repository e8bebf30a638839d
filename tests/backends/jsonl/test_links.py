"""JsonlStore never follows a link planted by a raw writer at one of its
own directories (``heads/``, ``titles/``, ``journals/``, a journal's
directory, ``erasures/``, ``.erasing/``, ``.batch/``, ``.ids/``, ``.kept/``,
``.listings/``): a call refuses with a `StorageError` naming the link, or
(for what only speeds reads up) goes on without it; nothing outside the
store is read, created, changed or removed. The store's own directory may
be a link."""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from sessionstore import JsonlStore, SessionMeta, StorageError
from sessionstore.testing.contract import message

pytestmark = pytest.mark.asyncio

Operation = Callable[[JsonlStore], Awaitable[object]]

OPERATIONS: dict[str, Operation] = {
    "set_head": lambda store: store.set_head("chat-2", "s1", expect=None),
    "head": lambda store: store.head("chat"),
    "heads": lambda store: store.heads(),
    "set_title": lambda store: store.set_title("s1", "Trip"),
    "titles": lambda store: store.titles("s1"),
    "journal append": lambda store: store.journal("agent").append_raw(b'{"line":"x"}'),
    "journal read": lambda store: store.journal("agent").read(),
    "journal clear": lambda store: store.journal("agent").clear(),
    "effect": lambda store: store.journal("agent").effects.once(lambda: 1, tool="t", key="k"),
    "journal erase": lambda store: store.journal("agent").erase(reason="test"),
    "append": lambda store: store.append("s1", message("e3", "more")),
    "append_many": lambda store: store.append_many("s1", [message("e4", "a"), message("e5", "b")]),
    "load": lambda store: store.load("s1"),
    "load_context": lambda store: store.load_context("s1"),
    "summaries": lambda store: store.summaries(),
    "erasures": lambda store: store.erasures(),
    "erase": lambda store: store.erase("s1", reason="test"),
}

LINKED = [
    "heads",
    "titles",
    "journals",
    "journals/agent",
    "erasures",
    ".erasing",
    ".erasing/session",
    ".batch",
    ".ids",
    ".kept",
    ".listings",
]


async def filled(directory: Path) -> None:
    async with JsonlStore(directory) as store:
        await store.create(SessionMeta(id="s1"))
        await store.append_many("s1", [message("e1", "hi"), message("e2", "there")])
        await store.set_head("chat", "s1", expect=None)
        await store.set_title("s1", "First")
        await store.journal("agent").append_raw(b'{"line":"x"}')
        await store.create(SessionMeta(id="gone"))
        await store.erase("gone", reason="test")
        await store.load_context("s1")
        await store.summaries()


def listing(directory: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(directory)): path.read_bytes() if path.is_file() else None
        for path in sorted(directory.rglob("*"))
    }


@pytest.mark.parametrize("linked", LINKED)
@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_a_link_at_a_directory_of_the_store_is_never_followed(
    tmp_path: Path, linked: str, operation: str
) -> None:
    store_dir, outside = tmp_path / "store", tmp_path / "outside"
    await filled(store_dir)
    planted = store_dir / linked
    if planted.exists():  # the raw writer moves it out and links to it
        shutil.move(planted, outside)
    else:
        outside.mkdir()
    os.symlink(outside, planted)
    before = listing(outside)
    refusal: StorageError | None = None
    async with JsonlStore(store_dir) as store:
        try:
            await OPERATIONS[operation](store)
        except StorageError as exc:  # or it went on without what the link holds
            refusal = exc
    if refusal is not None:
        assert f"{planted}: not a directory of the store" in str(refusal)
        assert "symbolic link, not followed" in str(refusal)
    assert listing(outside) == before  # nothing read through it changed, made or removed
    assert planted.is_symlink()


async def test_each_directory_planted_as_a_link_refuses_what_writes_there(tmp_path: Path) -> None:
    store_dir, outside = tmp_path / "store", tmp_path / "outside"
    await filled(store_dir)
    outside.mkdir()
    writes = {
        "heads": "set_head",
        "titles": "set_title",
        "journals/agent": "effect",
        "journals": "journal append",
        "erasures": "erase",
        ".erasing": "journal erase",
    }
    for linked, operation in writes.items():
        planted = store_dir / linked
        shutil.rmtree(planted, ignore_errors=True)
        os.symlink(outside, planted)
        async with JsonlStore(store_dir) as store:
            with pytest.raises(StorageError, match="not a directory of the store"):
                await OPERATIONS[operation](store)
        planted.unlink()
    assert list(outside.iterdir()) == []


async def test_the_store_directory_itself_may_be_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    await filled(real)
    os.symlink(real, tmp_path / "link")
    async with JsonlStore(tmp_path / "link") as store:
        await store.set_head("chat-2", "s1", expect=None)
        await store.journal("agent").append_raw(b'{"line":"y"}')
        assert await store.head("chat-2") == "s1"
