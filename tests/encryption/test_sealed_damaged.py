"""A sealed session that does not open (a damaged row, a damaged wrapped key,
or restored from a backup taken before its erase) is listed as a fault, not
a failure, and can still be erased (docs/encryption.md)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import ArchiveError, Message, MessageEntry, SessionMeta, SqlStore
from sessionstore.archive import export_archive
from tests.kinds import TEST_KEYS

KEY = TEST_KEYS[0]


@pytest.fixture
async def sealed(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(str(tmp_path / "s.db"), keys=KEY)
    for session_id in ("a", "b"):
        await store.create(SessionMeta(id=session_id))
        await store.append(session_id, MessageEntry.new(Message.user(f"{session_id} says")))
    yield store
    await store.close()


def damage(db: Path, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        for trigger in ("entries_no_update", "sessions_no_update"):
            connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        connection.execute(sql, args)


async def faults_then_erased(store: SqlStore, tmp_path: Path, why: str) -> None:
    """The damaged session ``b`` is skipped by `list`, reported by
    `integrity` and a whole export (which exports ``a``), then erased."""
    store.drop_caches()
    assert [meta.id for meta in await store.list()] == ["a"]
    faults = await store.integrity()
    assert any(fault.startswith("session 'b'") and why in fault for fault in faults)
    archive = tmp_path / "archive"
    with pytest.raises(ArchiveError, match=f"(?s)could not read .*session 'b'.*{why}"):
        await export_archive(store, archive, encrypted=True)
    assert (archive / "sessions" / "a.sealed").exists()
    erased = await store.erase("b", reason="asked")
    assert erased.name == "b"
    assert [meta.id for meta in await store.list()] == ["a"]
    assert await store.integrity() == []
    assert [record.name for record in await store.erasures()] == ["b"]


async def test_a_session_whose_header_is_damaged_is_a_fault_and_erasable(
    sealed: SqlStore, tmp_path: Path
) -> None:
    damage(tmp_path / "s.db", "UPDATE sessions SET header = ? WHERE id = 'b'", b"\x01" + b"y" * 60)
    await faults_then_erased(sealed, tmp_path, "does not hold")


async def test_a_session_restored_from_a_backup_after_its_erase_is_erasable_again(
    sealed: SqlStore, tmp_path: Path
) -> None:
    db, backup = tmp_path / "s.db", tmp_path / "backup.db"
    with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(backup)) as copy:
        source.backup(copy)
    first = await sealed.erase("b", reason="asked")
    await sealed.close()
    with closing(sqlite3.connect(backup)) as source, closing(sqlite3.connect(db)) as copy:
        source.backup(copy)  # the backup restored: b is back, its key destroyed
    async with await SqlStore.open(str(db), keys=KEY) as store:
        store.drop_caches()
        assert [meta.id for meta in await store.list()] == ["a"]
        assert any("session 'b'" in fault for fault in await store.integrity())
        again = await store.erase("b", reason="asked again")
        assert again.key is None  # its key was destroyed by the first
        assert first.key is not None
        assert await store.integrity() == []


async def test_a_session_with_a_damaged_entry_is_erased_and_its_key_destroyed(
    sealed: SqlStore, tmp_path: Path
) -> None:
    damage(
        tmp_path / "s.db",
        "UPDATE entries SET line = ? WHERE session_pk = (SELECT pk FROM sessions WHERE id = 'b')",
        b"\x01" + b"x" * 60,
    )
    sealed.drop_caches()
    assert any("session 'b'" in fault for fault in await sealed.integrity())
    erased = await sealed.erase("b", reason="asked")
    assert erased.key is not None  # its header opened: the key was its own
    assert await sealed.integrity() == []
    keys = tmp_path / "s.db.keys"
    with closing(sqlite3.connect(keys)) as connection:
        held = connection.execute(
            "SELECT count(*) FROM sessionstore_keyring_keys WHERE name = 'b'"
        ).fetchone()
    assert held == (0,)


async def test_a_damaged_wrapped_key_is_a_finding_of_integrity(
    sealed: SqlStore, tmp_path: Path
) -> None:
    await sealed.close()
    with closing(sqlite3.connect(tmp_path / "s.db.keys", isolation_level=None)) as connection:
        connection.execute(
            "UPDATE sessionstore_keyring_keys SET wrapped = ? WHERE name = 'b'", [b"z" * 44]
        )
    async with await SqlStore.open(str(tmp_path / "s.db"), keys=KEY) as store:
        await faults_then_erased(store, tmp_path, "data key is damaged")
