"""The JSONL crash-repair module (`sessionstore.backends.jsonl.file`): what it
exists for, each rule by itself, so that breaking any one fails a test."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import pytest

from sessionstore import (
    CorruptSessionError,
    JsonlStore,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    StorageError,
    encode_line,
)
from sessionstore.backends.files import complete_length, open_regular
from sessionstore.backends.jsonl import file as session_file
from sessionstore.testing.contract import message


async def new_session(directory: Path, *entries: MessageEntry, **options: str) -> Path:
    store = JsonlStore(directory, **options)  # type: ignore[arg-type]
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", entries)
    return store.path("s")


def open_fd(path: Path, flags: int = os.O_RDONLY) -> int:
    return os.open(path, flags | os.O_CLOEXEC)


# ------------------------------------------------------------ torn tails


@pytest.mark.parametrize("tail", [b"{", b"\r", b'{"type":"message","id":"e2'])
async def test_a_torn_tail_of_any_length_is_cut_at_the_last_newline(
    tmp_path: Path, tail: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    intact = path.read_bytes()
    path.write_bytes(intact + tail)
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert await JsonlStore(tmp_path).load("s") == [message("e1", "a")]
    assert path.read_bytes() == intact
    assert [record.getMessage() for record in caplog.records] == [
        f"session 's': dropping {len(tail)} bytes of a crash-truncated last line in {path}"
    ]


@pytest.mark.parametrize("length", [(1 << 16) - 1, 1 << 16, (1 << 16) + 1])
async def test_a_torn_tail_as_long_as_a_read_keeps_every_complete_line(
    tmp_path: Path, length: int
) -> None:
    # The last newline is read backwards a chunk of 64 KiB at a time: a
    # tail of 64 KiB - 1 bytes puts it at the first byte of the first chunk.
    path = await new_session(tmp_path, message("e1", "a"), message("e2", "b"))
    intact = path.read_bytes()
    path.write_bytes(intact + b"{" + b"x" * (length - 1))
    assert await JsonlStore(tmp_path).load("s") == [message("e1", "a"), message("e2", "b")]
    assert path.read_bytes() == intact


async def test_complete_size_is_the_size_after_the_repair(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"type":"mess')
    fd = open_fd(path)
    try:
        assert session_file.complete_size("s", path, fd, full=False) == len(intact)
        assert session_file.complete_size("s", path, fd, full=False) == len(intact)
    finally:
        os.close(fd)


async def test_repair_returns_the_size_whether_or_not_it_cut(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    intact = path.read_bytes()
    fd = open_fd(path, os.O_RDWR)
    try:
        assert session_file.repair("s", path, fd, full=False) == len(intact)
        path.write_bytes(intact + b"{")
        assert session_file.repair("s", path, fd, full=False) == len(intact)
    finally:
        os.close(fd)


async def test_after_a_repair_every_reader_sees_the_lines_and_nothing_more(
    tmp_path: Path,
) -> None:
    path = await new_session(tmp_path, message("e1", "a"), message("e2", "b"))
    intact = path.read_bytes()
    lines = intact.decode().splitlines()
    for read in ("raw_lines", "load_context", "iter_entries"):
        path.write_bytes(intact + b'{"type":"mess')
        store = JsonlStore(tmp_path)
        if read == "raw_lines":
            assert [line async for line in store.raw_lines("s")] == lines
        elif read == "load_context":
            assert [m.text() for m in await store.load_context("s")] == ["a", "b"]
        else:
            assert [e.id async for e in store.iter_entries("s")] == ["e1", "e2"]
        assert path.read_bytes() == intact, read


async def test_a_context_built_before_a_repair_goes_on_after_it(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    store = JsonlStore(tmp_path)
    path.write_bytes(path.read_bytes() + b'{"type":"mess')
    assert [m.text() for m in await store.load_context("s")] == ["a"]
    await store.append("s", message("e2", "b"))
    assert [m.text() for m in await store.load_context("s")] == ["a", "b"]


async def test_an_intact_file_is_not_touched_nor_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    before = os.stat(path)
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        await JsonlStore(tmp_path).load("s")
    assert caplog.text == ""
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns


# ------------------------------------------------------------ empty files


async def _raw(store: JsonlStore) -> list[str]:
    return [line async for line in store.raw_lines("s")]


OPERATIONS: dict[str, Callable[[JsonlStore], Awaitable[object]]] = {
    "load": lambda store: store.load("s"),
    "load_context": lambda store: store.load_context("s"),
    "append": lambda store: store.append("s", message("e1", "x")),
    "raw_lines": _raw,
}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("content", [b"", b'{"id":"s"'])
async def test_an_empty_or_header_torn_file_is_corrupt_not_a_storage_error(
    tmp_path: Path, operation: str, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = await new_session(tmp_path)
    path.write_bytes(content)
    call = OPERATIONS[operation](JsonlStore(tmp_path))
    with (
        caplog.at_level(logging.WARNING, logger="sessionstore"),
        pytest.raises(CorruptSessionError, match="empty session file") as caught,
    ):
        await call
    assert (caught.value.session_id, caught.value.path) == ("s", str(path))
    assert path.read_bytes() == b""
    assert ("crash-truncated" in caplog.text) == bool(content)


def test_an_empty_file_is_corrupt_at_the_repair_itself(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    fd = open_fd(path, os.O_RDWR)
    try:
        with pytest.raises(CorruptSessionError, match="missing header"):
            session_file.repair("s", path, fd, full=False)
        with pytest.raises(CorruptSessionError, match="missing header"):
            session_file.complete_size("s", path, fd, full=False)
    finally:
        os.close(fd)


def test_open_session_names_a_missing_session(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFoundError, match="'s'"):
        session_file.open_session("s", tmp_path / "s.jsonl", os.O_RDONLY)


# ------------------------------------------------------------ durability


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``fsync``ed from now on, by the crash-repair module's ``os``."""
    synced: list[str] = []
    real = os.fsync  # the module's os reference is this module

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_a_repair_is_fsynced_under_full_durability_only(
    tmp_path: Path, fsynced: list[str], durability: str
) -> None:
    path = await new_session(tmp_path, message("e1", "a"), durability=durability)
    intact = path.read_bytes()
    fsynced.clear()
    await JsonlStore(tmp_path, durability=durability).load("s")  # type: ignore[arg-type]
    assert str(path) not in fsynced  # nothing to repair: nothing to sync
    path.write_bytes(intact + b"{")
    await JsonlStore(tmp_path, durability=durability).load("s")  # type: ignore[arg-type]
    assert fsynced.count(str(path)) == (1 if durability == "full" else 0)


# ------------------------------------------------------------ locks


def hold(path: Path, lock: int) -> tuple[int, Callable[[], None]]:
    """Take ``lock`` on a file of our own; return the fd and what releases it."""
    fd = open_fd(path, os.O_RDWR | os.O_APPEND)
    fcntl.flock(fd, lock)
    return fd, lambda: os.close(fd)


def returns_only_after(release: Callable[[], None], call: Callable[[], object]) -> object:
    """Run ``call`` in a thread; check it is still waiting a while later, then
    ``release`` and return what it returned."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(call()))
    thread.start()
    thread.join(0.3)
    waited = thread.is_alive()
    release()
    thread.join(10)
    assert waited, "did not wait for the lock"
    return result[0]


async def test_complete_size_waits_for_an_append_under_way(tmp_path: Path) -> None:
    """An appender is halfway through the one write of a two-entry batch: its
    first line is out, whole, the second not yet. A reader waits for the
    batch rather than see half of it, or cut it as a torn tail."""
    path = await new_session(tmp_path, message("e1", "a"))
    intact = path.read_bytes()
    first, second = encode_line(message("e2", "b")), encode_line(message("e3", "c"))
    for written in (first, first + second[:10]):
        path.write_bytes(intact)
        appender, release = hold(path, fcntl.LOCK_EX)
        os.write(appender, written)

        def finish(
            appender: int = appender,
            release: Callable[[], None] = release,
            rest: bytes = (first + second)[len(written) :],
        ) -> None:
            os.write(appender, rest)
            release()

        fd = open_fd(path)
        try:
            size = returns_only_after(
                finish, partial(session_file.complete_size, "s", path, fd, full=False)
            )
        finally:
            os.close(fd)
        assert size == len(intact + first + second)  # the whole batch, nothing cut


async def test_an_append_waits_for_a_repair_or_an_append_under_way(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    intact = path.read_bytes()
    other, release = hold(path, fcntl.LOCK_EX)
    os.write(other, b'{"type":"mess')  # torn, until the holder finishes its line

    def finish() -> None:
        os.write(other, encode_line(message("e2", "b"))[len(b'{"type":"mess') :])
        release()

    store = JsonlStore(tmp_path)
    returns_only_after(finish, lambda: asyncio.run(store.append("s", message("e3", "c"))))
    assert path.read_bytes() == intact + encode_line(message("e2", "b")) + encode_line(
        message("e3", "c")
    )


async def test_a_repair_waits_for_readers_to_let_go(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    intact = path.read_bytes()
    path.write_bytes(intact + b"{")
    _, release = hold(path, fcntl.LOCK_SH)
    fd = open_fd(path)
    try:
        size = returns_only_after(
            release, lambda: session_file.complete_size("s", path, fd, full=False)
        )
    finally:
        os.close(fd)
    assert size == len(intact)


async def test_complete_size_lets_go_of_its_lock(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    path.write_bytes(path.read_bytes() + b"{")
    fd = open_fd(path)
    try:
        session_file.complete_size("s", path, fd, full=False)
        _, release = hold(path, fcntl.LOCK_EX | fcntl.LOCK_NB)  # would raise if held
        release()
    finally:
        os.close(fd)


def crash_mid_append(path: Path) -> None:
    """What a writer killed halfway through its write leaves: a torn line,
    written under the lock as every append is."""
    fd, release = hold(path, fcntl.LOCK_EX)
    try:
        os.write(fd, b'{"type":"message","id":"torn","message":{"ro')
    finally:
        release()


def run(call: Callable[[], object]) -> Callable[[], None]:
    def target() -> None:
        asyncio.run(call())  # type: ignore[arg-type]

    return target


async def test_readers_an_appender_and_crashes_racing_lose_and_repeat_nothing(
    tmp_path: Path,
) -> None:
    """Readers (each repairing what it finds torn), an appender writing large
    batches of two entries, and writers crashing halfway through a line, all
    at once, each on a file descriptor of its own as separate processes
    would be: every batch is kept once and in order, and no reader ever
    sees half a batch or a line still being written."""
    path = await new_session(tmp_path)
    batches = 12
    text = "x" * 1_500_000  # a batch is one write of 3 MB: hundreds of pages
    expected = [message(f"{n}-{half}", f"{n}{text}") for n in range(batches) for half in ("a", "b")]
    boundaries = {path.stat().st_size}
    for n in range(batches):
        batch = encode_line(expected[2 * n]) + encode_line(expected[2 * n + 1])
        boundaries.add(max(boundaries) + len(batch))
    done = threading.Event()
    seen: set[int] = set()
    errors: list[BaseException] = []

    async def append() -> None:
        store = JsonlStore(tmp_path)
        try:
            for n in range(batches):
                await store.append_many("s", expected[2 * n : 2 * n + 2])
                await asyncio.sleep(0.005)
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def read() -> None:
        while not done.is_set():
            fd = open_fd(path)
            try:
                size = session_file.complete_size("s", path, fd, full=False)
            except BaseException as exc:
                errors.append(exc)
                return
            finally:
                os.close(fd)
            if size not in boundaries:
                errors.append(AssertionError(f"a reader saw {size} bytes: half a batch"))
                return
            seen.add(size)

    def crash() -> None:
        while not done.is_set():
            crash_mid_append(path)
            time.sleep(0.001)

    threads = [threading.Thread(target=run(append)), threading.Thread(target=crash)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert await JsonlStore(tmp_path).load("s") == expected
    assert len(seen) > 2  # the readers did read while the appends went on


# ------------------------------------------------------------ headers and listing


def test_read_header_reads_the_first_line_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(encode_line(SessionMeta(id="s")).replace(b"\n", b"\r\n") + b"junk\n")
    assert session_file.read_header(path, "s") == SessionMeta(id="s")


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        (b"", "empty session file (missing header line): not listed"),
        (b'{"id":"s"}', "line 1: torn header line (no newline after it): not listed"),
        (b'{"id":5}\n', "line 1: "),
        (b'{"id":"t"}\n', "line 1: header names session 't': not listed"),
    ],
)
def test_a_file_without_a_sound_header_is_a_fault_naming_it(
    tmp_path: Path, content: bytes, fault: str
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    found = session_file.header_or_fault(path, "s")
    assert isinstance(found, str)
    assert found.startswith(f"session 's', {path}")
    assert fault in found


def test_a_name_that_is_no_session_id_is_a_fault(tmp_path: Path) -> None:
    path = tmp_path / ".s.jsonl"
    path.write_bytes(encode_line(SessionMeta(id=".s")))
    found = session_file.header_or_fault(path, ".s")
    assert found == f"{path}: not a session file: invalid session id '.s': starts with '.'"


@pytest.fixture
def unreadable(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Make files unreadable (as root, permissions do not stop a read)."""
    refused: set[str] = set()
    real = open_regular

    def refusing(path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
        if os.fspath(path) in refused:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real(path, flags, mode)

    monkeypatch.setattr(session_file, "open_regular", refusing)
    return lambda path: refused.add(str(path))


async def test_an_unreadable_file_is_skipped_by_list_and_a_fault(
    tmp_path: Path, unreadable: Callable[[Path], None], caplog: pytest.LogCaptureFixture
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="good"))
    await store.create(SessionMeta(id="locked"))
    unreadable(store.path("locked"))
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert [meta.id for meta in await store.list()] == ["good"]
    fault = f"{store.path('locked')}: Permission denied: not listed"
    assert fault in caplog.text
    assert await store.integrity() == [fault]
    with pytest.raises(StorageError, match="Permission denied"):
        await store.load("locked")


async def test_a_directory_named_like_a_session_is_a_fault_saying_so(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="good"))
    (tmp_path / "dir.jsonl").mkdir()
    assert await store.integrity() == [
        f"{tmp_path / 'dir.jsonl'}: not a regular file (a directory): not listed"
    ]


def test_parse_names_session_and_file_when_there_is_no_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with pytest.raises(CorruptSessionError) as caught:
        session_file.parse("s", path, b"")
    error = caught.value
    assert (error.session_id, error.reason, error.path, error.line) == (
        "s",
        "empty session file (missing header line)",
        str(path),
        None,
    )


async def test_an_invalid_header_names_its_file_and_line(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"))
    path.write_bytes(b'{"id":5}\n' + path.read_bytes().split(b"\n", 1)[1])
    with pytest.raises(CorruptSessionError) as caught:
        await JsonlStore(tmp_path).load("s")
    assert (caught.value.path, caught.value.line) == (str(path), 1)


async def test_an_intact_file_is_neither_scanned_nor_locked_exclusively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last byte tells an intact file: no scan for its last newline, and
    no exclusive lock, so readers never wait for one another."""
    path = await new_session(tmp_path, message("e1", "a"))
    scans: list[int] = []
    real = complete_length

    def counted(fd: int, size: int) -> int:
        scans.append(size)
        return real(fd, size)

    monkeypatch.setattr(session_file, "complete_length", counted)
    _, release = hold(path, fcntl.LOCK_SH)  # another reader
    fd = open_fd(path, os.O_RDWR)
    try:
        done = threading.Event()

        def read() -> None:
            session_file.complete_size("s", path, fd, full=False)
            done.set()

        thread = threading.Thread(target=read)
        thread.start()
        assert done.wait(5), "waited for another reader"
        assert session_file.repair("s", path, fd, full=False) == path.stat().st_size
    finally:
        release()
        thread.join(10)
        os.close(fd)
    assert scans == []


# ------------------------------------------------ a batch whose writer died


async def test_a_batch_whose_writer_died_mid_write_is_cut_back_whole(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "kept"))
    before = path.read_bytes()
    # What a writer killed inside its write leaves: its note, and the first
    # lines of its batch, each whole.
    session_file.batch_started(path, len(before))
    with path.open("ab") as file:
        file.write(encode_line(message("b1", "half")) + encode_line(message("b2", "a batch")))
    store = JsonlStore(tmp_path)
    assert await store.load("s") == [message("e1", "kept")]
    assert path.read_bytes() == before
    assert not (tmp_path / session_file.BATCHES / path.name).exists()
    await store.append_many("s", [message("e2", "next"), message("e3", "turn")])
    assert [entry.id for entry in await store.load("s")] == ["e1", "e2", "e3"]


async def test_a_batch_written_whole_leaves_no_note(tmp_path: Path) -> None:
    path = await new_session(tmp_path, message("e1", "a"), message("e2", "b"))
    assert not (tmp_path / session_file.BATCHES / path.name).exists()
    assert [entry.id for entry in await JsonlStore(tmp_path).load("s")] == ["e1", "e2"]
