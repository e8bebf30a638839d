"""Forks and named heads of the JSONL store, beyond the contract: the fork's
bytes, how they are copied, what a crash leaves, and the head files."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import random
import signal
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from sessionstore import (
    CorruptSessionError,
    EntryNotFoundError,
    JsonlStore,
    SessionEntry,
    SessionMeta,
    StorageError,
    build_context,
    encode,
)
from sessionstore.backends.jsonl import file as session_file
from sessionstore.backends.jsonl import hints as jsonl_hints
from sessionstore.backends.jsonl import store as jsonl_store
from sessionstore.backends.jsonl.file import READ
from sessionstore.backends.jsonl.temporary import ABANDONED_AFTER
from sessionstore.testing.common import (
    IMPORTED_LINES,
    compaction,
    imported_header,
    message,
    stream,
)
from tests.helpers import WORKERS, ForkServer
from tests.workers.jsonl_forker import header

FORKER = WORKERS / "jsonl_forker.py"
HEAD_MOVER = WORKERS / "head_mover.py"


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path)


def fork_bytes(meta: SessionMeta, source: bytes, end: int | None = None) -> bytes:
    """What a fork's file holds: its header line, then the source's entry
    lines after its header, up to byte ``end`` of the source (all: None)."""
    start = source.index(b"\n") + 1
    return (encode(meta) + "\n").encode() + source[start:end]


def end_of(data: bytes, entry_line: str) -> int:
    """Where the first line ``entry_line`` of a file ends (after its newline)."""
    at = data.index(b"\n" + entry_line.encode() + b"\n") + 1
    return at + len(entry_line) + 1


MIDDLE = "pad-middle"


async def large_imported_session(store: JsonlStore, size: int = 2000) -> tuple[bytes, str]:
    """A session ``src`` of ``size`` times 2 KB (4 MB) imported as written
    elsewhere (no line in canonical form, ``\\r`` line ends among them), and
    the line of the entry `MIDDLE` in its middle."""
    lines = []
    for n in range(size):
        lines += IMPORTED_LINES
        padded = message(MIDDLE if n == size // 2 else f"pad-{n}", "p" * 1500)
        lines.append(encode(padded).replace('"type"', ' "type"') + "\r")
    await store.import_session(imported_header("src"), stream(lines))
    data = store.path("src").read_bytes()
    assert len(data) > size * 2000
    return data, lines[6 * (size // 2) + 5]


# ------------------------------------------------------------ the fork's bytes


@pytest.mark.parametrize("read", [READ, 4096])
async def test_a_fork_is_its_header_then_the_source_lines_byte_for_byte(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch, read: int
) -> None:
    source, middle = await large_imported_session(store)
    monkeypatch.setattr(jsonl_store, "READ", read)  # lines across blocks
    whole = await store.fork("src")
    assert store.path(whole.id).read_bytes() == fork_bytes(whole, source)
    part = await store.fork("src", at=MIDDLE)
    assert store.path(part.id).read_bytes() == fork_bytes(part, source, end_of(source, middle))
    assert store.path("src").read_bytes() == source  # never written


async def test_a_fork_at_an_id_ends_at_its_first_line_however_spelled(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.import_session(imported_header("src"), stream(IMPORTED_LINES))
    source = store.path("src").read_bytes()
    monkeypatch.setattr(jsonl_store, "READ", 7)  # no line whole in one block
    # "\u006b" in the first line is "k", the id of the third line too.
    meta = await store.fork("src", at="k")
    expected = fork_bytes(meta, source, end_of(source, IMPORTED_LINES[0]))
    assert store.path(meta.id).read_bytes() == expected
    last = await store.fork("src", at="m5")
    assert store.path(last.id).read_bytes() == fork_bytes(last, source)


async def test_full_durability_forks_the_same_bytes(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path, durability="full")
    await store.create(SessionMeta(id="src"))
    await store.append_many("src", [message("e1", "a"), message("e2", "b")])
    meta = await store.fork("src", at="e1")
    source = store.path("src").read_bytes()
    expected = fork_bytes(meta, source, end_of(source, encode(message("e1", "a"))))
    assert store.path(meta.id).read_bytes() == expected
    assert stat.S_IMODE(os.stat(store.path(meta.id)).st_mode) == 0o600


# ------------------------------------------------------------ how the bytes are copied


def spy_copy(monkeypatch: pytest.MonkeyPatch, refuse: Callable[[int], OSError | None]) -> list[int]:
    """Count the bytes asked of ``os.copy_file_range``; ``refuse(call)``
    gives the error its call number ``call`` raises, if any."""
    real = os.copy_file_range
    asked: list[int] = []

    def copy(src: int, dst: int, count: int, offset_src: int | None = None) -> int:
        error = refuse(len(asked))
        asked.append(count)
        if error is not None:
            raise error
        return real(src, dst, min(count, 100_000), offset_src)  # in several calls

    monkeypatch.setattr(os, "copy_file_range", copy)
    return asked


needs_copy_file_range = pytest.mark.skipif(
    not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here"
)


@needs_copy_file_range
async def test_copy_file_range_copies_the_lines(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = await large_imported_session(store)
    asked = spy_copy(monkeypatch, lambda call: None)
    read: list[int] = []
    real_pread = os.pread

    def pread(fd: int, count: int, offset: int) -> bytes:
        read.append(count)
        return real_pread(fd, count, offset)

    monkeypatch.setattr(os, "pread", pread)
    meta = await store.fork("src")
    assert store.path(meta.id).read_bytes() == fork_bytes(meta, source)
    assert asked[0] == len(source) - source.index(b"\n") - 1  # every line, asked at once
    assert len(asked) > 1
    assert sum(read) < len(source) // 10  # the header: the lines never came through


@needs_copy_file_range
@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP])
@pytest.mark.parametrize("when", [0, 3])  # refused at once, or part way
async def test_where_copy_file_range_is_refused_reads_and_writes_copy_the_rest(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch, code: int, when: int
) -> None:
    source, middle = await large_imported_session(store, 500)  # refused after 300 KB
    monkeypatch.setattr(jsonl_store, "READ", 65536)  # many reads and writes
    asked = spy_copy(
        monkeypatch, lambda call: OSError(code, os.strerror(code)) if call >= when else None
    )
    meta = await store.fork("src")
    assert store.path(meta.id).read_bytes() == fork_bytes(meta, source)
    assert len(asked) == when + 1  # refused once: never asked again
    part = await store.fork("src", at=MIDDLE)
    assert store.path(part.id).read_bytes() == fork_bytes(part, source, end_of(source, middle))


async def test_without_copy_file_range_reads_and_writes_copy_the_lines(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = await large_imported_session(store)
    monkeypatch.delattr(os, "copy_file_range", raising=False)  # macOS, say
    meta = await store.fork("src")
    assert store.path(meta.id).read_bytes() == fork_bytes(meta, source)


@needs_copy_file_range
async def test_a_failed_copy_is_a_storage_error_naming_the_fork_and_leaves_nothing(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await large_imported_session(store)
    spy_copy(monkeypatch, lambda call: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    with pytest.raises(StorageError, match=r"f1\.jsonl: No space left"):
        await store.fork("src", meta=SessionMeta(id="f1"))
    assert sorted(os.listdir(store.directory)) == ["src.jsonl"]
    assert await store.integrity() == []


# ------------------------------------------------------------ what the source holds


async def test_a_torn_tail_of_the_source_is_repaired_as_a_load_does_and_never_copied(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.create(SessionMeta(id="src"))
    await store.append("src", message("e1", "a"))
    intact = store.path("src").read_bytes()
    store.path("src").write_bytes(intact + b'{"type":"message","id":"e2"')
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        meta = await store.fork("src")
    assert store.path(meta.id).read_bytes() == fork_bytes(meta, intact)
    assert store.path("src").read_bytes() == intact
    assert "dropping 27 bytes of a crash-truncated last line" in caplog.text


async def test_a_batch_whose_writer_died_is_cut_back_and_never_copied(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="src"))
    await store.append("src", message("e1", "a"))
    intact = store.path("src").read_bytes()
    # A writer died in the middle of a batch: its first line is whole.
    session_file.batch_started(store.path("src"), len(intact))
    with store.path("src").open("ab") as file:
        file.write((encode(message("e2", "b")) + "\n").encode())
    meta = await store.fork("src")
    assert store.path(meta.id).read_bytes() == fork_bytes(meta, intact)


async def test_a_line_up_to_the_fork_point_that_does_not_decode_is_named(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="src"))
    await store.append_many("src", [message("e1", "a"), message("e2", "b"), message("e3", "c")])
    data = store.path("src").read_bytes().replace(b'"id":"e2"', b'"id":2')
    store.path("src").write_bytes(data)
    with pytest.raises(CorruptSessionError) as error:
        await store.fork("src", at="e3", meta=SessionMeta(id="f1"))
    assert (error.value.session_id, error.value.path, error.value.line) == (
        "src",
        str(store.path("src")),
        3,
    )
    assert not store.path("f1").exists()
    # Before the bad line, nothing after the fork point is decoded.
    assert [e.id for e in await store.load((await store.fork("src", at="e1")).id)] == ["e1"]


async def test_a_fork_of_everything_copies_lines_without_decoding_them(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="src"))
    await store.append_many("src", [message("e1", "a"), message("e2", "b")])
    store.path("src").write_bytes(store.path("src").read_bytes() + b"not json\n")
    meta = await store.fork("src")
    with pytest.raises(CorruptSessionError) as error:  # reported where it is read
        await store.load(meta.id)
    assert (error.value.path, error.value.line) == (str(store.path(meta.id)), 4)


async def test_an_entry_not_found_creates_nothing(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="src"))
    await store.append("src", message("e1", "a"))
    with pytest.raises(EntryNotFoundError):
        await store.fork("src", at="nope", meta=SessionMeta(id="f1"))
    assert sorted(os.listdir(store.directory)) == ["src.jsonl"]


# ------------------------------------------------------------ hints and contexts


async def test_a_fork_of_a_long_compacted_session_builds_its_own_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_hints, "HINT_FROM", 0)  # a hint for every search
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="src"))
    log: list[SessionEntry] = [message(f"old{n}", f"old {n}") for n in range(50)]
    log += [message("k", "kept"), compaction("c", "s", "k")]
    await store.append_many("src", log)
    await store.load_context("src")  # the source's hint is written
    assert (tmp_path / jsonl_hints.HINTS / "src").exists()

    async def agree(fork: str, entries: list[SessionEntry]) -> None:
        expected = build_context(entries)
        assert await store.load_context(fork) == expected
        assert await JsonlStore(tmp_path).load_context(fork) == expected  # from its hint

    whole = (await store.fork("src")).id
    assert not (tmp_path / jsonl_hints.HINTS / whole).exists()  # none copied
    await agree(whole, log)
    more: list[SessionEntry] = [
        message("x", "after"),
        message("k", "later"),
        compaction("c2", "s2", "k"),
    ]
    await store.append_many(whole, more)
    await agree(whole, log + more)
    # Forked before the kept message: a compaction waits for it, then finds it.
    early = (await store.fork("src", at="old10")).id
    waiting: list[SessionEntry] = [
        compaction("c3", "s3", "k"),
        message("k", "k"),
        message("z", "z"),
    ]
    for entry in waiting:
        await store.append(early, entry)
        await agree(early, [*log[:11], *waiting[: waiting.index(entry) + 1]])
    assert await store.load_context("src") == build_context(log)


# ------------------------------------------------------------ crashes


async def fork_until_killed(
    server: ForkServer, directory: Path, prefix: str, at: str, full: bool, delay: float
) -> int:
    """Run a process forking ``src`` again and again; kill it ``delay``
    seconds after it is ready. Return how many forks had returned."""
    worker = await server.run(str(directory), "src", prefix, at, "full" if full else "normal")
    assert await worker.readline() == b"ready\n"
    await asyncio.sleep(delay)
    worker.kill()
    returned = (await worker.read()).split()
    assert await worker.wait() == -signal.SIGKILL
    assert returned == [str(n).encode() for n in range(len(returned))]
    return len(returned)


async def test_a_fork_killed_at_any_moment_leaves_no_fork_or_a_whole_one(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="src"))
    entries = [message(f"e{n}", "x" * 1000) for n in range(3000)]  # 3 MB
    await store.append_many("src", entries)
    source = store.path("src").read_bytes()
    rng = random.Random(20260719)
    servers = [ForkServer(FORKER) for _ in range(4)]  # one per worker at once
    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            await stack.enter_async_context(server)
        await kill_forks(store, servers, entries, source, rng)
    assert store.path("src").read_bytes() == source


async def kill_forks(
    store: JsonlStore,
    servers: list[ForkServer],
    entries: Sequence[SessionEntry],
    source: bytes,
    rng: random.Random,
) -> None:
    """Five rounds of four workers forking at once, each killed at random."""
    last = encode(entries[-2])
    for round_ in range(5):
        # Four at once, each to its own forks: all the lines (mostly copying
        # and publishing), or up to an entry near the end (decoding most of
        # the file first); fsynced or not.
        runs = [(f"r{round_}w{w}", "-" if w < 2 else entries[-2].id, w % 2 == 0) for w in range(4)]
        delays = [rng.uniform(0, 0.03) for _ in runs]
        returned = await asyncio.gather(
            *(
                fork_until_killed(server, store.directory, prefix, at, full, delay)
                for server, (prefix, at, full), delay in zip(servers, runs, delays, strict=True)
            )
        )
        temporaries = [name for name in os.listdir(store.directory) if name.startswith(".r")]
        assert len(temporaries) <= len(runs)  # at most the fork each was in
        for (prefix, at, _), done in zip(runs, returned, strict=True):
            end = None if at == "-" else end_of(source, last)
            forks = sorted(n for n in os.listdir(store.directory) if n.startswith(f"{prefix}-"))
            assert len(forks) in (done, done + 1)  # those that returned, and the one in flight
            for n in range(len(forks)):
                meta = header("src", f"{prefix}-{n}")
                assert store.path(meta.id).read_bytes() == fork_bytes(meta, source, end)
                store.path(meta.id).unlink()
        listed = [m.id for m in await store.list()]
        assert listed == ["src"]
        # A temporary left behind is never listed, and no fault: nothing is lost.
        assert await store.integrity() == []
        for name in temporaries:
            (store.directory / name).unlink()


async def test_the_next_fork_deletes_a_temporary_only_once_its_writer_is_gone(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="src"))
    temporary = store.directory / f".f1.jsonl.fork-{'0' * 32}"
    temporary.write_bytes(b'{"id":"f1"}\n')
    old = time.time() - ABANDONED_AFTER - 5
    fd = os.open(temporary, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer holds it, however old
        os.utime(temporary, (old, old))
        await store.fork("src")
        assert temporary.exists()
    finally:
        os.close(fd)
    recent = store.directory / f".f2.jsonl.import-{'1' * 32}"
    recent.write_bytes(b"")  # unlocked, but maybe in the instant before its lock
    await store.fork("src")
    assert not temporary.exists()  # abandoned: swept
    assert recent.exists()
    assert await store.integrity() == []
    assert [m.id for m in await store.list() if not m.parent_session] == ["src"]


async def test_a_head_file_holds_one_encoded_move_per_line_privately(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s1"))
    moves = [await store.set_head("chat", "s1") for _ in range(2)]
    path = store.directory / "heads" / "chat.jsonl"
    assert path.read_bytes() == "".join(encode(m) + "\n" for m in moves).encode()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


async def test_a_torn_last_move_is_dropped_then_cut_before_the_next(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.create(SessionMeta(id="s1"))
    first = await store.set_head("chat", "s1")
    path = store.directory / "heads" / "chat.jsonl"
    with path.open("ab") as file:
        file.write(b'{"session_id":"s')
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert await store.head_history("chat") == [first]
    assert f"head 'chat': dropping 16 bytes of a crash-truncated last line in {path}" in caplog.text
    second = await store.set_head("chat", "s1")
    assert path.read_bytes() == (encode(first) + "\n" + encode(second) + "\n").encode()
    assert await store.integrity() == []


async def test_a_move_that_does_not_decode_is_named_by_file_and_line(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s1"))
    await store.set_head("chat", "s1")
    path = store.directory / "heads" / "chat.jsonl"
    with path.open("ab") as file:
        file.write(b'{"session_id":1}\n')
    with pytest.raises(CorruptSessionError) as error:
        await store.head("chat")
    assert (error.value.path, error.value.line, error.value.what) == (str(path), 2, "head")
    assert str(error.value).startswith(f"head 'chat', {path} line 2: invalid head move")
    (fault,) = await store.integrity()
    assert fault.startswith(f"head 'chat', {path} line 2: invalid head move")


async def test_what_is_no_head_file_is_skipped_and_reported(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.create(SessionMeta(id="s1"))
    await store.set_head("chat", "s1")
    (store.directory / "heads" / "dir.jsonl").mkdir()
    os.mkfifo(store.directory / "heads" / "fifo.jsonl")
    (store.directory / "heads" / "notes.txt").write_text("ignored")
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert await store.heads() == ["chat"]
    assert "a directory" in caplog.text
    assert sorted(await store.integrity()) == [
        f"{store.directory / 'heads' / 'dir.jsonl'}: not a regular file (a directory): not listed",
        f"{store.directory / 'heads' / 'fifo.jsonl'}: not a regular file (a FIFO): not listed",
    ]
    with pytest.raises(StorageError, match=r"fifo\.jsonl: not a regular file"):
        await store.set_head("fifo", "s1")
    with pytest.raises(StorageError, match=r"fifo\.jsonl: not a regular file"):
        await store.head("fifo")


async def test_a_head_never_names_what_is_not_a_session_file(store: JsonlStore) -> None:
    os.mkfifo(store.path("fifo"))
    with pytest.raises(StorageError, match=r"fifo\.jsonl: not a regular file"):
        await store.set_head("chat", "fifo")
    assert await store.heads() == []


async def test_two_processes_moving_one_head_keep_every_move(store: JsonlStore) -> None:
    for name in ("a", "b"):
        await store.create(SessionMeta(id=name))
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(HEAD_MOVER), str(store.directory), "busy", name, "200"
        )
        for name in ("a", "b")
    ]
    assert [await worker.wait() for worker in workers] == [0, 0]
    history = [move.session_id for move in await store.head_history("busy")]
    assert sorted(history) == ["a"] * 200 + ["b"] * 200
    assert await store.integrity() == []
