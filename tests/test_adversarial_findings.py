"""Findings of the adversarial campaigns (scripts/adversarial/), one test each.

Each test fails until its finding is fixed: it states what the docs promise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sessionstore import (
    CompactionEntry,
    CorruptSessionError,
    Journal,
    Message,
    MessageEntry,
    SessionHeader,
    SessionMeta,
    SessionStoreError,
    Timestamp,
    build_context,
    export_archive,
    import_archive,
    open_store,
)
from sessionstore.verify import verify_store

STAMP = "2026-01-01T00:00:00Z"


def entry(entry_id: str, text: str) -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp=STAMP, message=Message.user(text))


def flip(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite, in place, the one occurrence of ``old`` in a file (same length)."""
    assert len(old) == len(new)
    data = path.read_bytes()
    assert data.count(old) == 1, f"{old!r} occurs {data.count(old)} times"
    path.write_bytes(data.replace(old, new))


async def test_sql_line_flipped_out_of_utf8_is_named_not_a_driver_error(tmp_path: Path) -> None:
    """corrupt.py, sqlite: a bit flip that leaves an entry's line invalid UTF-8
    made load(), integrity() and verify raise StorageError("Could not decode to
    UTF-8 column 'line' with text ...") instead of naming the session and entry."""
    db = tmp_path / "s.db"
    async with open_store(str(db)) as store:
        await store.create(SessionMeta(id="s", created_at=STAMP))
        await store.append_many("s", [entry("e1", "hello"), entry("e2", "ZZflipZZ")])
    flip(db, b"ZZflipZZ", b"ZZ\xfflipZZ")
    async with open_store(str(db)) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("s")
        assert caught.value.session_id == "s"
        assert caught.value.line == 3  # the header is line 1, e2 is line 3
        faults = await store.integrity()
        assert any(fault.startswith("session 's': entry 2 ") for fault in faults), faults
        report = await verify_store(store)
        assert not report.ok


async def test_sql_row_type_flipped_is_seen_by_verify_or_harmless(tmp_path: Path) -> None:
    """corrupt.py, sqlite (flip-column): the ``type`` column of an entry row is
    read by load_context's queries but covered by no digest and no full index.
    One flipped bit there ('message' -> 'messagf') drops the message from the
    context while load() and verify_store() see nothing wrong."""
    db = tmp_path / "s.db"
    async with open_store(str(db)) as store:
        await store.create(SessionMeta(id="s", created_at=STAMP))
        await store.append_many("s", [entry("e1", "one"), entry("e2unique", "two")])
    flip(db, b"e2uniquemessage", b"e2uniquemessagf")  # entry_id, then type, in the record
    async with open_store(str(db)) as store:
        context = await store.load_context("s")
        report = await verify_store(store)
        assert context == build_context(await store.load("s")) or not report.ok, (
            f"load_context gives {len(context)} messages, load 2, and verify is clean"
        )


async def test_sql_row_first_kept_id_flipped_is_seen_by_verify_or_harmless(
    tmp_path: Path,
) -> None:
    """The same for ``first_kept_id``: load_context cuts where the column says,
    not where the compaction's line says."""
    db = tmp_path / "s.db"
    async with open_store(str(db)) as store:
        await store.create(SessionMeta(id="s", created_at=STAMP))
        marker = CompactionEntry(id="c", timestamp=STAMP, summary="sum", first_kept_id="keepme")
        await store.append_many(
            "s", [entry("a", "1"), entry("keepme", "2"), entry("b", "3"), marker]
        )
    # The record holds: entry_id, type, timestamp, first_kept_id, line.
    flip(db, b"compaction" + STAMP.encode() + b"keepme", b"compaction" + STAMP.encode() + b"keepmf")
    async with open_store(str(db)) as store:
        context = await store.load_context("s")
        report = await verify_store(store)
        assert context == build_context(await store.load("s")) or not report.ok, (
            f"load_context gives {[m.text() for m in context]}, and verify is clean"
        )


_FILL_UP = """
import asyncio, resource, signal, sys
from sessionstore import FileJournal, StorageError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
path, limit = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    asyncio.run(FileJournal(path).append_raw(b"x" * 60, b"y" * 60, b"z" * 60))
except StorageError:
    print("refused")
"""


def test_file_journal_append_raw_is_all_or_none_when_the_disk_fills(tmp_path: Path) -> None:
    """full_disk.py, import -> jsonl: a disk filling in the middle of
    append_raw (the archive import of a journal) left its first lines in the
    file, though append_raw promises all or none; the import run again then
    refused the journal for ever ("differs from the stored journal")."""
    path = tmp_path / "agent" / "session_journal.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"line":"session","started_at":"2026-01-01T00:00:00Z","model":"m"}\n')
    before = path.read_bytes()
    limit = len(before) + 100  # room for one line and a half of the three
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FILL_UP), str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang: a loaded machine may take minutes
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert done.stdout.strip() == "refused", done.stderr
    assert path.read_bytes() == before, "a refused append_raw left part of its lines"


@pytest.mark.parametrize("name", ["a\x00b.db", "a\x00b"])
async def test_a_target_holding_nul_is_a_clean_error(tmp_path: Path, name: str) -> None:
    """hostile.py, targets: a path with a NUL raised ValueError ("embedded null
    byte") from inside the SQL engine, outside the error tree."""
    with pytest.raises(SessionStoreError):
        async with open_store(f"{tmp_path}/{name}") as store:
            await store.list()


async def test_a_jsonl_target_whose_name_is_too_long_is_a_clean_error(tmp_path: Path) -> None:
    """hostile.py, targets: a directory name of 300 bytes raised OSError
    (ENAMETOOLONG) from JsonlStore's constructor, outside the error tree."""
    with pytest.raises(SessionStoreError):
        async with open_store(str(tmp_path / ("y" * 300))) as store:
            await store.list()


async def test_import_does_not_read_through_a_symlink_out_of_the_archive(tmp_path: Path) -> None:
    """hostile.py, import: a session file (or sessions/ itself) that is a
    symlink to a file outside the archive was imported: an archive from
    elsewhere can make import read any session file the user can read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(
        '{"version":1,"id":"secret","created_at":"2026-01-01T00:00:00Z"}\n'
    )
    (tmp_path / "archive" / "sessions").mkdir(parents=True)
    (tmp_path / "archive" / "sessions" / "secret.jsonl").symlink_to(outside / "secret.jsonl")
    async with open_store("memory://") as store:
        with contextlib.suppress(SessionStoreError):  # a refusal is fine
            await import_archive(store, tmp_path / "archive")
        assert [meta.id for meta in await store.list()] == []


async def test_export_does_not_write_through_a_symlink_out_of_the_archive(tmp_path: Path) -> None:
    """hostile.py, export: a journal's directory (or sessions/) in the
    destination that is a symlink out of it made export write its file
    there, outside the archive."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "dest" / "journals").mkdir(parents=True)
    (tmp_path / "dest" / "journals" / "j1").symlink_to(outside)
    async with open_store("memory://") as store:
        journal = store.journal("j1")
        await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), Journal())
        with contextlib.suppress(SessionStoreError):  # a refusal is fine
            await export_archive(store, tmp_path / "dest")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("target", ["", "   "])
async def test_a_blank_target_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """hostile.py, targets: "" opened the current directory as a JSONL store
    (and "   " a directory named three spaces there): sessions landed in
    whatever directory the process stood in."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SessionStoreError):
        async with open_store(target) as store:
            await store.create(SessionMeta(id="s", created_at=STAMP))
    assert list(tmp_path.iterdir()) == []


async def test_a_sqlite_schema_whose_text_is_not_utf8_is_the_store_s_error(tmp_path: Path) -> None:
    # corrupt.py, fourth round: one flipped byte in sqlite_master's text made
    # sqlite3's own error message undecodable, and a bare UnicodeDecodeError
    # left every call of the store.
    db = tmp_path / "store.db"
    async with open_store(db) as store:
        await store.create(SessionMeta(id="a"))
    data = bytearray(db.read_bytes())
    at = data.find(b"CREATE TABLE sessions")
    assert at > 0
    data[at + 2] = 0x81  # not a UTF-8 start byte
    db.write_bytes(data)
    with pytest.raises(SessionStoreError, match="database disk image is malformed"):
        async with open_store(db) as store:
            await store.list()
