"""FileJournal in a hostile directory: FIFOs and links at its name, a full
disk, other local users, journals too large to hold."""

from __future__ import annotations

import os
import stat
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionstore import FileJournal, Journal, StorageError, encode_line
from sessionstore.backends.files import fsync_directory
from sessionstore.backends.jsonl import journal as journal_module
from sessionstore.testing.journal_contract import header, post
from tests.hostile import bounded, disk_fills_on, fill, make_fifo, mounted_tmpfs, run_capped


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path) as disk:
        yield disk


async def test_a_fifo_at_the_journals_name_is_refused_by_name(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    fifo = make_fifo(journal.path)
    for call in (journal.read, journal.read_bytes, lambda: journal.append(post(1))):
        with pytest.raises(StorageError) as caught:
            await bounded(call(), fifo)
        assert str(caught.value) == f"journal {fifo}: not a regular file (a FIFO)"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_journal_linked_to_dev_zero_is_refused_not_read_forever(tmp_path: Path) -> None:
    link = tmp_path / "session_journal.jsonl"
    link.symlink_to("/dev/zero")
    out = run_capped(
        """
        import asyncio, sys
        from sessionstore import FileJournal, StorageError
        try:
            asyncio.run(FileJournal(sys.argv[1]).read())
        except StorageError as exc:
            print("refused:", exc)
        """,
        str(link),
    )
    assert f"refused: journal {link}: not a regular file (a symbolic link" in out, out


async def test_a_link_at_the_journals_name_is_not_followed(tmp_path: Path) -> None:
    target = FileJournal.in_dir(tmp_path / "elsewhere")
    await target.append(post(1))
    before = target.path.read_bytes()
    journal = FileJournal.in_dir(tmp_path / "agent")
    journal.path.parent.mkdir()
    journal.path.symlink_to(target.path)
    for call in (journal.read, journal.read_bytes, lambda: journal.append(post(2))):
        with pytest.raises(StorageError, match="symbolic link") as caught:
            await call()
        assert str(journal.path) in str(caught.value)
    assert target.path.read_bytes() == before


async def test_an_append_is_whole_or_absent_when_the_disk_fills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.begin(header(0), Journal())
    before = journal.path.read_bytes()
    lines = [encode_line(post(n)).rstrip(b"\n") for n in range(1, 5)]

    free = disk_fills_on(monkeypatch, journal.path)
    with pytest.raises(StorageError, match="No space left") as caught:
        await journal.append_raw(*lines)
    assert journal.path.read_bytes() == before  # no line of the batch, no half line
    assert str(journal.path) in str(caught.value)

    free()
    await journal.append_raw(*lines)
    assert journal.path.read_bytes() == before + b"".join(line + b"\n" for line in lines)
    read = await journal.read()
    assert (read.writes(), read.skipped) == (4, [])


async def test_a_full_tmpfs_leaves_the_journal_as_it_was(small_disk: Path) -> None:
    journal = FileJournal.in_dir(small_disk / "agent")
    await journal.begin(header(0), Journal())
    before = journal.path.read_bytes()
    filler = fill(small_disk, 16 * 1024)
    big = [b'{"line":"comment","pad":"' + b"z" * 50_000 + b'"}' for _ in range(4)]
    with pytest.raises(StorageError, match="No space left"):
        await journal.append_raw(*big)
    assert journal.path.read_bytes() == before
    filler.unlink()
    await journal.append(post(1))
    read = await journal.read()
    assert (read.writes(), read.skipped) == (1, [])


async def test_the_agent_directory_is_created_private(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path / "agents" / "a1")
    await journal.append(post(1))
    for directory in (tmp_path / "agents", tmp_path / "agents" / "a1"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


async def test_read_streams_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.begin(header(0), Journal())
    for n in range(1, 4):
        await journal.append(post(n))
    with journal.path.open("ab") as file:
        file.write(b"torn")
    expected = Journal.parse(journal.path.read_bytes())
    blocks = [block async for block in journal.read_blocks()]
    assert b"".join(blocks) == journal.path.read_bytes() == await journal.read_bytes()

    async def whole() -> bytes:
        raise AssertionError("read the journal whole")

    monkeypatch.setattr(journal, "read_bytes", whole)
    assert await journal.read() == expected
    assert expected.skipped == [5]


def peak_of_reading(journal: FileJournal) -> tuple[Journal, int]:
    import asyncio

    tracemalloc.start()
    try:
        read = asyncio.run(journal.read())
        return read, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_journal_is_read_in_bounded_memory(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    line = b'{"line":"unknown","pad":"' + b"q" * 4000 + b'"}\n'  # skipped, as a newer format
    with journal.path.open("wb") as file:
        file.write(encode_line(header(0)))
        for _ in range(12_000):  # 48 MB
            file.write(line)
        file.write(encode_line(post(1)))
    read, peak = peak_of_reading(journal)
    assert read.writes() == 1
    assert len(read.skipped) == 12_000
    assert peak < 12_000_000, peak


def test_a_journal_of_one_endless_line_is_read_in_bounded_memory(tmp_path: Path) -> None:
    journal = FileJournal.in_dir(tmp_path)
    with journal.path.open("wb") as file:
        file.truncate(64 << 20)  # 64 MB of NUL bytes, no newline
    read, peak = peak_of_reading(journal)
    assert read.skipped == [1]
    assert peak < 12_000_000, peak


def test_repr_names_the_file(tmp_path: Path) -> None:
    assert repr(FileJournal(tmp_path / "j.jsonl")) == f"FileJournal({str(tmp_path / 'j.jsonl')!r})"


async def test_read_bytes_joins_every_block_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "READ", 7)
    journal = FileJournal.in_dir(tmp_path)
    await journal.begin(header(0), Journal())
    await journal.append(post(1))
    blocks = [block async for block in journal.read_blocks()]
    assert len(blocks) > 2
    assert {len(block) for block in blocks[:-1]} == {7}
    assert await journal.read_bytes() == journal.path.read_bytes()


async def test_a_cut_back_that_fails_too_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = FileJournal.in_dir(tmp_path)
    await journal.append(post(1))
    size = journal.path.stat().st_size
    disk_fills_on(monkeypatch, journal.path)

    def broken(fd: int, size: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", broken)
    with pytest.raises(StorageError, match="No space left") as caught:
        await journal.append_raw(b"x" * 100, b"y" * 100)
    notes = getattr(caught.value.__cause__, "__notes__", [])
    assert notes == [
        f"and cutting the file back to {size} bytes failed: [Errno 5] Input/output error"
    ]


async def test_the_directory_is_synced_when_the_file_is_new_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    real = fsync_directory

    def counted(directory: Path) -> None:
        synced.append(directory)
        real(directory)

    monkeypatch.setattr(journal_module, "fsync_directory", counted)
    journal = FileJournal.in_dir(tmp_path / "agent")
    await journal.append(post(1))  # a new directory, a new file
    assert synced == [tmp_path, tmp_path / "agent"]
    synced.clear()
    await journal.append(post(2))
    assert synced == []
    journal.path.write_bytes(b"")  # there, but empty: its name was synced before
    await journal.append(post(3))
    assert synced == [tmp_path / "agent"]
