"""JsonlStore's own threads: started by its first call, ended by close; a
read left half done at close is refused as closed, never left waiting."""

import asyncio
import fcntl
import gc
import os
import threading
from pathlib import Path

import pytest

from sessionstore import ClosedError, JsonlStore, SessionMeta
from sessionstore.testing.contract import message
from tests.helpers import open_files, until_a_lock_waits_on


def store_threads(directory: Path) -> set[threading.Thread]:
    """The live threads of the stores of ``directory`` (named after it)."""
    name = f"sessionstore-jsonl {directory}-"
    return {t for t in threading.enumerate() if t.name.startswith(name) and t.is_alive()}


async def test_the_threads_of_a_store_end_when_it_closes(tmp_path: Path) -> None:
    before = store_threads(tmp_path)
    store = JsonlStore(tmp_path)
    assert store_threads(tmp_path) == before  # none until there is work
    await store.create(SessionMeta(id="s"))
    for n in range(20):
        await store.append("s", message(f"e{n}", "hi"))
    assert len(await store.load_context("s")) == 20
    started = store_threads(tmp_path) - before
    assert started
    await store.close()
    assert not any(thread.is_alive() for thread in started)


async def test_a_read_going_on_at_close_is_refused_as_closed(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    text = "x" * 100_000
    await store.append_many("s", [message(f"e{n}", text) for n in range(30)])  # 3 MB: blocks
    blocks = store.raw_blocks("s")
    assert await anext(blocks)
    await store.close()
    with pytest.raises(ClosedError) as caught:
        await anext(blocks)
    # Named by the session's file, as an OS error in the call would be.
    assert str(caught.value) == f"session 's': the store holding {store.path('s')} is closed"
    assert str(store.path("s")) not in open_files()  # the refused read's file closed


async def test_a_store_collected_unclosed_ends_its_threads(tmp_path: Path) -> None:
    before = store_threads(tmp_path)
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    started = store_threads(tmp_path) - before
    del store  # never closed
    gc.collect()
    for thread in started:
        thread.join(5)
        assert not thread.is_alive()


async def test_a_session_locked_elsewhere_holds_up_no_other_session(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    ids = [f"s{n}" for n in range(12)]
    for session_id in ids:
        await store.create(SessionMeta(id=session_id))
    holder = os.open(store.path("s0"), os.O_RDWR)  # another open file: its lock is another's
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        waiting = asyncio.ensure_future(store.append("s0", message("held", "hi")))
        others = [asyncio.ensure_future(store.append(s, message("e", "hi"))) for s in ids[1:]]
        done, _ = await asyncio.wait(others, timeout=30)
        assert len(done) == len(others)  # whichever thread each session's calls found
        assert not waiting.done()
    finally:
        os.close(holder)  # releases the lock
    await waiting
    assert [entry.id for entry in await store.load("s0")] == ["held"]
    await store.close()


async def test_a_cancelled_append_waiting_for_its_lock_is_written_once_it_is_let_go(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    holder = os.open(store.path("s"), os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        waiting = asyncio.ensure_future(store.append("s", message("first", "hi")))
        queued = asyncio.ensure_future(store.append("s", message("second", "hi")))
        await asyncio.sleep(0)  # both reach the session's calls
        for task in (waiting, queued):
            task.cancel()
        for task in (waiting, queued):
            with pytest.raises(asyncio.CancelledError):
                await task
    finally:
        os.close(holder)
    await store.close()  # lets the calls reached finish
    async with JsonlStore(tmp_path) as again:
        assert [entry.id for entry in await again.load("s")] == ["first", "second"]


async def test_a_read_cancelled_while_its_call_waits_leaves_the_file_whole(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e", "hi"))
    holder = os.open(store.path("s"), os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the read's call waits for its shared lock
    reading = asyncio.ensure_future(anext(store.raw_blocks("s")))
    await until_a_lock_waits_on(store.path("s"))
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    # A file opened now may get the number of the read's file, were it closed.
    other = tmp_path / "other.txt"
    other.write_bytes(b"a line\nand no newline")
    opened = os.open(other, os.O_RDONLY)
    try:
        os.close(holder)  # the read's call goes on
        await store.close()  # and ends
    finally:
        os.close(opened)
    assert other.read_bytes() == b"a line\nand no newline"
    assert str(store.path("s")) not in open_files()  # closed, once its call ended
    async with JsonlStore(tmp_path) as again:
        assert [entry.id for entry in await again.load("s")] == ["e"]


async def test_a_read_cancelled_before_its_file_opened_leaves_it_closed(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    holder = os.open(store.path("s"), os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the append's call waits for it
    try:
        waiting = asyncio.ensure_future(store.append("s", message("e", "hi")))
        await until_a_lock_waits_on(store.path("s"))
        # The read's opening of the file waits behind the append's call.
        reading = asyncio.ensure_future(anext(store.raw_blocks("s")))
        for _ in range(5):
            await asyncio.sleep(0)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
    finally:
        os.close(holder)  # the append's call goes on, then the opening
    await waiting
    await store.close()  # and both end
    assert str(store.path("s")) not in open_files()  # what the opening opened, closed
