"""A cancelled call that reached a thread still runs there: what its caller
lets go after it (a cut back, a close, a lock) follows it, never runs beside
it, and is never left undone.

A call is held at the bad instant by a wrapper of the function it runs,
waiting in its thread for the test (`tests.helpers.Hold`: real threads,
real files)."""

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessionstore import FileJournal, Journal, JsonlStore, SessionMeta, encode_line
from sessionstore.backends.files import write_all
from sessionstore.backends.jsonl import blocks, importing
from sessionstore.testing.contract import message
from sessionstore.testing.journal_contract import header, post
from tests.helpers import (
    Hold,
    cancel_while_held,
    naming,
    open_files,
    until_a_lock_waits_on,
    until_closed,
)


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


def entry_line(entry_id: str, text: str) -> str:
    return encode_line(message(entry_id, text)).decode().rstrip("\n")


async def session(tmp_path: Path) -> tuple[JsonlStore, str]:
    """A store with session "s" of one entry, and its header line."""
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e", "hi"))
    return store, store.path("s").read_bytes().split(b"\n")[0].decode()


async def test_an_import_of_more_cancelled_while_it_waits_for_the_lock_lets_it_go(
    tmp_path: Path,
) -> None:
    store, first = await session(tmp_path)
    path = store.path("s")
    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the import's opening waits for the file's lock
    try:
        more = lines(entry_line("f", "more"))
        importing_more = asyncio.ensure_future(store.import_session(first, more, after=1))
        await until_a_lock_waits_on(path)
        importing_more.cancel()
        with pytest.raises(asyncio.CancelledError):
            await importing_more
    finally:
        os.close(holder)  # the import's opening takes the lock, then finds no one waiting
    # A guard against a hang, not a limit: the lock must have been let go.
    await asyncio.wait_for(store.append("s", message("g", "after")), timeout=60)
    assert [entry.id for entry in await store.load("s")] == ["e", "g"]
    await store.close()
    assert await until_closed(path)


async def test_an_import_of_more_cancelled_mid_write_is_cut_back_after_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, first = await session(tmp_path)
    path = store.path("s")
    before = path.read_bytes()
    hold = Hold(write_all, naming(path))
    monkeypatch.setattr(importing, "write_all", hold)
    (tmp_path / "other").write_bytes(b"")
    more = lines(entry_line("f", "more"))
    importing_more = asyncio.ensure_future(store.import_session(first, more, after=1))
    await cancel_while_held(importing_more, hold, path, tmp_path / "other")
    assert (tmp_path / "other").read_bytes() == b""  # nothing written into another file
    assert path.read_bytes() == before  # all or nothing: cut back once the write ran
    await store.append("s", message("g", "after"))  # the lock let go
    assert [entry.id for entry in await store.load("s")] == ["e", "g"]
    await store.close()


async def test_a_journal_read_cancelled_mid_read_closes_its_file_after_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.begin(header(0), Journal())
    await journal.append(post(1))
    hold = Hold(os.read, naming(journal.path))
    monkeypatch.setattr(os, "read", hold)
    (tmp_path / "other").write_bytes(b"another file's bytes")
    blocks = journal.read_blocks()
    reading = asyncio.ensure_future(anext(blocks))
    await cancel_while_held(reading, hold, journal.path, tmp_path / "other")
    monkeypatch.undo()
    assert b"".join([block async for block in journal.read_blocks()]) == journal.path.read_bytes()


async def test_a_block_import_cancelled_mid_write_removes_its_temporary_after_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))  # a session's file, whose lines are imported as "t"
    source = store.path("s").read_bytes().replace(b'"id":"s"', b'"id":"t"')
    assert source != store.path("s").read_bytes()

    def temporary_of_t(fd: int, *_: Any) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / ".t.jsonl."))
        except OSError:
            return False

    hold = Hold(write_all, temporary_of_t)
    monkeypatch.setattr(blocks, "write_all", hold)

    async def one(block: bytes) -> AsyncIterator[bytes]:
        yield block

    importing_new = asyncio.ensure_future(store.import_blocks("t", one(source)))
    try:
        await hold.until_started()
        importing_new.cancel()
        with pytest.raises(asyncio.CancelledError):
            await importing_new
        # The write goes on in its thread: the temporary it writes is kept meanwhile.
        assert [name for name in os.listdir(tmp_path) if name.startswith(".t.jsonl.")]
    finally:
        hold.go.set()
    for _ in range(3000):  # a guard against a hang: removed once the write ran
        if not [name for name in os.listdir(tmp_path) if name.startswith(".t.jsonl.")]:
            break
        await asyncio.sleep(0.01)
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".t.jsonl.")]
    assert not any(name.startswith(str(tmp_path / ".t.jsonl.")) for name in open_files())
    assert not store.path("t").exists()
    await store.close()
