"""An archive round trip keeps a journal's keyed lines, and the destination's
index finds them: its effects replay, its keys scan and drop."""

from pathlib import Path

import pytest

from sessionstore import SessionStore, open_store
from sessionstore.archive import export_archive, import_archive
from sessionstore.testing.effects_contract import Tool
from tests.kinds import STORE_KINDS, StoreTargets

LINES = [
    b'{"key":"t1:cp:0001","n":1}',
    b'{"line":"post","at":"2026-12-03T00:00:00Z"}',
    b'{"key":"t1:cp:0002","n":2}',
    b'{"key":"t2:cp:0001","n":3}',
    b'{"key":"t1:cp:0001","n":4}',
    b'{"key":"t1:cp:0003","n":5}',
]


async def fill_and_export(target: str, archive: Path) -> None:
    async with open_store(target) as source:
        journal = source.journal("agent")
        await journal.append_raw(*LINES)
        assert await journal.drop("t1:cp:0003", reason="pruned") is not None
        await journal.effects.once(lambda: {"id": 1}, tool="mail", key="mail-1")
        await export_archive(source, archive)


async def assert_found(store: SessionStore) -> None:
    mail = Tool()
    journal = store.journal("agent")
    assert await journal.keyed("t1:cp:0001", "t1:cp:0003") == {"t1:cp:0001": [LINES[0], LINES[4]]}
    assert await journal.scan("t1:", limit=5) == [
        ("t1:cp:0002", [LINES[2]]),
        ("t1:cp:0001", [LINES[0], LINES[4]]),
    ]
    assert await journal.effects.once(mail, tool="mail", key="mail-1") == {"id": 1}
    assert mail.runs == 0
    record = await journal.drop("t2:cp:0001", reason="after the import")
    assert record is not None
    assert record.lines == 1
    assert await journal.scan("t2:") == []


@pytest.mark.parametrize("destination", [*STORE_KINDS, "sqlite-sealed"])
async def test_an_imported_journal_is_indexed_on_every_backend(
    tmp_path: Path, destination: str, store_targets: StoreTargets
) -> None:
    await fill_and_export(store_targets.new("jsonl"), tmp_path / "archive")
    target, options = store_targets.new(destination), store_targets.options(destination)
    async with open_store(target, **options) as store:
        await import_archive(store, tmp_path / "archive")
        await assert_found(store)


@pytest.mark.parametrize("source", STORE_KINDS)
async def test_every_backend_exports_its_keyed_lines(
    tmp_path: Path, source: str, store_targets: StoreTargets
) -> None:
    await fill_and_export(store_targets.new(source), tmp_path / "archive")
    target = store_targets.new("sqlite")
    async with open_store(target) as store:
        await import_archive(store, tmp_path / "archive")
        await export_archive(store, tmp_path / "again")
    async with open_store(target) as store:  # another store object: the index is the database's
        await assert_found(store)
    exported = tmp_path / "archive" / "journals" / "agent" / "session_journal.jsonl"
    again = tmp_path / "again" / "journals" / "agent" / "session_journal.jsonl"
    assert exported.read_bytes() == again.read_bytes()
    assert b"t1:cp:0003" not in exported.read_bytes()  # dropped before the export
