"""JsonlStore in a hostile directory: FIFOs and links named like sessions,
files it cannot list, a full disk, other local users."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from sessionstore import (
    JsonlStore,
    SessionMeta,
    StorageError,
    encode_line,
)
from sessionstore.backends.jsonl import hints as jsonl_hints
from sessionstore.testing.contract import compaction, message
from sessionstore.verify import verify_store
from tests.hostile import bounded, disk_fills_on, fill, make_fifo, mounted_tmpfs

Operation = Callable[[JsonlStore, str], Awaitable[object]]


async def _raw(store: JsonlStore, session_id: str) -> list[str]:
    return [line async for line in store.raw_lines(session_id)]


async def _entries(store: JsonlStore, session_id: str) -> list[object]:
    return [entry async for entry in store.iter_entries(session_id)]


async def _import_more(store: JsonlStore, session_id: str) -> int:
    async def nothing() -> AsyncIterator[str]:
        lines: list[str] = []
        for line in lines:
            yield line

    header = encode_line(SessionMeta(id=session_id)).decode().rstrip("\n")
    return await store.import_session(header, nothing(), after=0)


OPERATIONS: dict[str, Operation] = {
    "load": lambda store, sid: store.load(sid),
    "load_context": lambda store, sid: store.load_context(sid),
    "append": lambda store, sid: store.append(sid, message("e9", "x")),
    "raw_lines": _raw,
    "iter_entries": _entries,
    "import_session": _import_more,
}


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "store")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path) as disk:
        yield disk


async def test_a_fifo_named_like_a_session_is_refused_by_name_never_opened(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.create(SessionMeta(id="good"))
    fifo = make_fifo(store.directory / "pipe.jsonl")
    for name, operation in OPERATIONS.items():
        with pytest.raises(StorageError, match="not a regular file") as caught:
            await bounded(operation(store, "pipe"), fifo)
        assert str(fifo) in str(caught.value), name
        assert "FIFO" in str(caught.value), name
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        listed = await bounded(store.list(), fifo)
    assert [meta.id for meta in listed] == ["good"]
    assert str(fifo) in caplog.text
    faults = await bounded(store.integrity(), fifo)
    assert len(faults) == 1
    assert str(fifo) in faults[0]
    assert "FIFO" in faults[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # left as it was


async def test_a_fifo_in_place_of_a_new_session_is_named_not_a_duplicate(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="good"))
    fifo = make_fifo(store.directory / "pipe.jsonl")
    with pytest.raises(StorageError, match="FIFO") as caught:
        await bounded(store.create(SessionMeta(id="pipe")), fifo)
    assert str(fifo) in str(caught.value)


async def test_a_link_named_like_a_session_is_not_followed(
    store: JsonlStore, tmp_path: Path
) -> None:
    elsewhere = JsonlStore(tmp_path / "elsewhere")
    await elsewhere.create(SessionMeta(id="linked"))
    await elsewhere.append("linked", message("e1", "private"))
    target = elsewhere.path("linked")
    before = target.read_bytes()
    await store.create(SessionMeta(id="good"))
    store.path("linked").symlink_to(target)

    for name, operation in OPERATIONS.items():
        with pytest.raises(StorageError, match="symbolic link") as caught:
            await operation(store, "linked")
        assert str(store.path("linked")) in str(caught.value), name
    assert target.read_bytes() == before  # neither read through nor written
    assert [meta.id for meta in await store.list()] == ["good"]
    (fault,) = await store.integrity()
    assert str(store.path("linked")) in fault
    assert "symbolic link" in fault


async def test_the_store_directory_itself_may_be_a_link(tmp_path: Path) -> None:
    real = JsonlStore(tmp_path / "real")
    await real.create(SessionMeta(id="s"))
    (tmp_path / "link").symlink_to(tmp_path / "real")
    via_link = JsonlStore(tmp_path / "link")
    await via_link.append("s", message("e1", "x"))
    assert await via_link.load("s") == [message("e1", "x")]


async def test_what_list_cannot_list_is_an_integrity_fault_naming_each_file(
    store: JsonlStore,
) -> None:
    good = SessionMeta(id="good")
    await store.create(good)
    assert await store.integrity() == []
    directory = store.directory
    bad = {
        "empty": b"",
        "torn": b'{"id":"torn"',
        "garbage": b"not json\n",
        "mismatch": encode_line(SessionMeta(id="other")),
    }
    for name, data in bad.items():
        (directory / f"{name}.jsonl").write_bytes(data)
    (directory / "dir.jsonl").mkdir()
    pipe = make_fifo(directory / "pipe.jsonl")
    (directory / ".hidden.jsonl").write_bytes(encode_line(SessionMeta(id=".hidden")))
    (directory / "notes.txt").write_bytes(b"not named like a session")
    journal = make_fifo(directory / "journals" / "agent" / "session_journal.jsonl")

    assert await bounded(store.list(), pipe) == [good]
    faults = await bounded(store.integrity(), pipe, journal)
    names = [*bad, "dir", "pipe", ".hidden"]
    for name in names:
        path = str(directory / f"{name}.jsonl")
        assert sum(path + ":" in f or path + " " in f for f in faults) == 1, (name, faults)
    assert any(str(journal) in f and "FIFO" in f for f in faults), faults
    assert len(faults) == len(names) + 1
    assert "torn header" in next(f for f in faults if "torn.jsonl" in f)
    assert "empty session file" in next(f for f in faults if "empty.jsonl" in f)
    assert "a directory" in next(f for f in faults if "dir.jsonl" in f)
    assert await bounded(store.journals(), journal) == []


async def test_verify_faults_a_session_whose_header_is_corrupt(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="good"))
    await store.create(SessionMeta(id="bad"))
    await store.append("bad", message("e1", "kept, but the header is gone"))
    path = store.path("bad")
    path.write_bytes(b"{corrupt\n" + path.read_bytes().split(b"\n", 1)[1])
    report = await verify_store(store)
    assert not report.ok
    assert any(str(path) in fault for fault in report.faults), report.faults


async def test_a_batch_is_all_or_nothing_when_the_disk_fills(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e0", "before"))
    path = store.path("s")
    before = path.read_bytes()
    batch = [message(f"e{n}", "x" * 1000) for n in range(1, 9)]

    free = disk_fills_on(monkeypatch, path)
    with pytest.raises(StorageError, match="No space left") as caught:
        await store.append_many("s", batch)
    assert path.read_bytes() == before  # the half that went out is cut back
    assert str(path) in str(caught.value)  # the file, not only the directory

    free()
    await store.append_many("s", batch)  # the retry stores the batch once
    assert await store.load("s") == [message("e0", "before"), *batch]


async def test_a_full_tmpfs_leaves_the_session_as_it_was(small_disk: Path) -> None:
    store = JsonlStore(small_disk / "store")
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e0", "before"))
    path = store.path("s")
    before = path.read_bytes()
    filler = fill(small_disk, 64 * 1024)
    batch = [message(f"e{n}", "y" * 20_000) for n in range(1, 11)]  # about 200 KB

    with pytest.raises(StorageError, match="No space left") as caught:
        await store.append_many("s", batch)
    assert path.read_bytes() == before
    assert str(path) in str(caught.value)

    filler.unlink()
    await store.append_many("s", batch)
    assert await store.load("s") == [message("e0", "before"), *batch]


async def test_directories_are_created_private_to_their_owner(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "a" / "b")
    await store.create(SessionMeta(id="s"))
    await store.journal("agent").append_raw(b"x")
    for directory in (
        tmp_path / "a",
        tmp_path / "a" / "b",
        tmp_path / "a" / "b" / "journals",
        tmp_path / "a" / "b" / "journals" / "agent",
    ):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert stat.S_IMODE(store.path("s").stat().st_mode) == 0o600


async def test_an_imported_session_creates_its_directory_private(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "new")

    async def lines() -> AsyncIterator[str]:
        yield encode_line(message("e1", "x")).decode().rstrip("\n")

    header = encode_line(SessionMeta(id="s")).decode().rstrip("\n")
    await store.import_session(header, lines())
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700


async def test_a_fifo_in_place_of_a_context_hint_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_hints, "HINT_FROM", 0)  # a hint for any search
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    kept = [message("k", "kept"), message("t", "tail")]
    await store.append_many("s", [message("o", "old"), *kept, compaction("c", "sum", "k")])
    fifo = make_fifo(tmp_path / jsonl_hints.HINTS / "s")
    context = await bounded(JsonlStore(tmp_path).load_context("s"), fifo)
    assert [m.text() for m in context][1:] == ["kept", "tail"]
