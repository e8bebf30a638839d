"""`JsonlStore.import_blocks`: another store's blocks written as they come,
a new session published whole, more of one by replacing its file whole."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import (
    DuplicateSessionError,
    InvalidRecordError,
    JsonlStore,
    MemoryStore,
    SessionConflictError,
    SessionMeta,
    encode_line,
)
from sessionstore.testing.common import message
from tests.helpers import until_a_lock_waits_on

HAND_WRITTEN = (  # CRLF, spaces, another key order: written as it is
    b'{ "version": 1, "id": "s" }\r\n'
    b'{"message": {"content": "hi", "role": "user"}, "id": "m1",'
    b' "timestamp": "2026-01-01T00:00:00.123456789Z", "type": "message"}\r\n'
)


async def blocks_of(*blocks: bytes) -> AsyncIterator[bytes]:
    for block in blocks:
        yield block


async def failing(*blocks: bytes) -> AsyncIterator[bytes]:
    for block in blocks:
        yield block
    raise RuntimeError("the source failed")


def leftovers(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


async def test_a_new_session_is_the_source_store_s_bytes(tmp_path: Path) -> None:
    source = MemoryStore()
    await source.import_session(HAND_WRITTEN.split(b"\n")[0].decode(), blocks_of_lines())
    store = JsonlStore(tmp_path)
    assert await store.import_blocks("s", source.raw_blocks("s")) == 1
    assert store.path("s").read_bytes() == HAND_WRITTEN
    assert [entry.id for entry in await store.load("s")] == ["m1"]


async def blocks_of_lines() -> AsyncIterator[str]:
    yield HAND_WRITTEN.split(b"\n")[1].decode()


async def test_more_of_a_session_replaces_its_file_never_writing_into_it(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    other_name = tmp_path / "backup.copy"
    os.link(store.path("s"), other_name)  # another name of the old file
    more = encode_line(message("e2", "b")) + encode_line(message("e3", "c"))
    assert await store.import_blocks("s", blocks_of(more), after=1) == 2
    assert store.path("s").read_bytes() == HAND_WRITTEN + more
    assert other_name.read_bytes() == HAND_WRITTEN
    assert [entry.id for entry in await store.load("s")] == ["m1", "e2", "e3"]
    assert leftovers(tmp_path) == []


async def test_more_of_a_session_cuts_a_crash_s_remnant_first(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    store.path("s").write_bytes(HAND_WRITTEN + b'{"type":"mess')
    more = encode_line(message("e2", "b"))
    await store.import_blocks("s", blocks_of(more), after=1)
    assert store.path("s").read_bytes() == HAND_WRITTEN + more


async def test_more_after_another_count_is_a_conflict_and_changes_nothing(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    with pytest.raises(SessionConflictError, match="holds 1 entries, not 2"):
        await store.import_blocks("s", blocks_of(encode_line(message("e2", "b"))), after=2)
    assert store.path("s").read_bytes() == HAND_WRITTEN
    assert leftovers(tmp_path) == []


async def test_a_source_failing_midway_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    more = failing(encode_line(message("e2", "b")))
    with pytest.raises(RuntimeError, match="the source failed"):
        await store.import_blocks("s", more, after=1)
    assert store.path("s").read_bytes() == HAND_WRITTEN
    with pytest.raises(RuntimeError, match="the source failed"):
        await store.import_blocks("t", failing(b'{"id":"t"}\n'))
    assert not store.path("t").exists()
    assert leftovers(tmp_path) == []


async def test_a_new_session_over_one_that_exists_is_refused(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    held = store.path("s").read_bytes()
    with pytest.raises(DuplicateSessionError):
        await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    assert store.path("s").read_bytes() == held


@pytest.mark.parametrize(
    ("blocks", "reason"),
    [
        ((b'{"id":"other"}\n',), "names session 'other', not 's'"),
        ((b"not json\n",), "header line"),
        ((HAND_WRITTEN[:-1],), "a block ends inside a line"),
        ((), "no header line"),
    ],
)
async def test_a_new_session_s_header_and_lines_are_checked(
    tmp_path: Path, blocks: tuple[bytes, ...], reason: str
) -> None:
    store = JsonlStore(tmp_path)
    with pytest.raises(InvalidRecordError, match=reason):
        await store.import_blocks("s", blocks_of(*blocks))
    assert not store.path("s").exists()
    assert leftovers(tmp_path) == []


async def test_an_append_after_more_blocks_goes_into_the_new_file(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    more = encode_line(message("e2", "b"))
    await store.import_blocks("s", blocks_of(more), after=1)
    await store.append("s", message("e3", "c"))  # into the new file, by its name
    assert store.path("s").read_bytes() == HAND_WRITTEN + more + encode_line(message("e3", "c"))


async def test_an_append_waiting_for_the_old_file_s_lock_lands_in_the_new_file(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.import_blocks("s", blocks_of(HAND_WRITTEN))
    copied, go_on = asyncio.Event(), asyncio.Event()
    more = encode_line(message("e2", "b"))

    async def paused() -> AsyncIterator[bytes]:
        copied.set()  # the old file is copied aside and locked by now
        await go_on.wait()
        yield more

    extending = asyncio.create_task(store.import_blocks("s", paused(), after=1))
    await copied.wait()
    # Another store object (another process) appends: it waits for the lock.
    appending = asyncio.create_task(JsonlStore(tmp_path).append("s", message("e3", "c")))
    await asyncio.sleep(0.2)  # time for its thread to reach the lock (either way it must hold)
    assert not appending.done()
    go_on.set()
    await extending
    await appending
    assert store.path("s").read_bytes() == HAND_WRITTEN + more + encode_line(message("e3", "c"))


async def test_an_import_cancelled_while_it_waits_for_the_lock_leaves_the_session_unlocked(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e", "hi"))
    holder = os.open(store.path("s"), os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the import's copy waits for the file's lock

    more = blocks_of(encode_line(message("f", "more")))
    importing = asyncio.ensure_future(store.import_blocks("s", more, after=1))
    await until_a_lock_waits_on(store.path("s"))
    importing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await importing
    os.close(holder)  # the import's copy takes the lock, then finds no one waiting
    # A guard against a hang, not a limit: the lock must have been let go.
    await asyncio.wait_for(store.append("s", message("g", "after")), timeout=60)
    assert [entry.id for entry in await store.load("s")] == ["e", "g"]
    await store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".s.jsonl")) == []
