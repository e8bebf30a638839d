"""A sealed store's heads are authenticated: a raw writer without the keys
cannot point one at another session (docs/encryption.md, threat model)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import CorruptSessionError, Message, MessageEntry, SessionMeta, SqlStore
from tests.kinds import TEST_KEYS

KEY = TEST_KEYS[0]


@pytest.fixture
async def sealed(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(str(tmp_path / "s.db"), keys=KEY)
    for owner in ("alice", "bob"):
        await store.create(SessionMeta(id=f"{owner}-1", owner=owner))
        await store.append(f"{owner}-1", MessageEntry.new(Message.user(f"{owner} says")))
        await store.set_head(owner, f"{owner}-1")
    yield store
    await store.close()


def raw(db: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(db, isolation_level=None)
    for trigger in ("head_seals_no_delete", "heads_no_delete"):
        connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    return connection


async def test_a_head_moved_by_a_raw_insert_is_refused_naming_it(
    sealed: SqlStore, tmp_path: Path
) -> None:
    with closing(raw(tmp_path / "s.db")) as connection:
        connection.execute(
            "INSERT INTO heads (name, seq, session_id, at) "
            "VALUES ('alice', 2, 'bob-1', '2026-12-03T00:00:00Z')"
        )
    with pytest.raises(CorruptSessionError, match=r"'bob-1'.*head 'alice' position 2.*no seal"):
        await sealed.head("alice")
    with pytest.raises(CorruptSessionError, match="head 'alice' position 2"):
        await sealed.head_history("alice")
    with pytest.raises(CorruptSessionError, match="head 'alice' position 2"):
        await sealed.set_head("alice", "alice-1")  # never written after a forged position
    assert await sealed.head("bob") == "bob-1"
    (fault,) = await sealed.integrity()  # and sessionstore verify
    assert "head 'alice' position 2 names it but has no seal" in fault


async def test_a_seal_copied_from_another_head_does_not_match(
    sealed: SqlStore, tmp_path: Path
) -> None:
    with closing(raw(tmp_path / "s.db")) as connection:
        (at, seal) = connection.execute(
            "SELECT h.at, s.seal FROM heads h JOIN head_seals s USING (name, seq) "
            "WHERE name = 'bob'"
        ).fetchone()
        connection.execute(
            "INSERT INTO heads (name, seq, session_id, at) VALUES ('alice', 2, 'bob-1', ?)", [at]
        )
        connection.execute("INSERT INTO head_seals VALUES ('alice', 2, ?)", [seal])
    with pytest.raises(CorruptSessionError, match=r"head 'alice' position 2.*does not match"):
        await sealed.head("alice")


async def test_heads_of_a_store_sealed_before_head_seals_are_sealed_once(
    sealed: SqlStore, tmp_path: Path
) -> None:
    with closing(raw(tmp_path / "s.db")) as connection:
        connection.execute("DELETE FROM head_seals")  # as a store sealed before 0010 holds
    with pytest.raises(CorruptSessionError, match="seal_heads"):
        await sealed.head("alice")
    assert await sealed.seal_heads() == 2
    assert await sealed.seal_heads() == 0
    assert [await sealed.head(name) for name in ("alice", "bob")] == ["alice-1", "bob-1"]
    await sealed.set_head("alice", "bob-1")  # a move by the store itself is sealed
    assert await sealed.head("alice") == "bob-1"


async def test_a_plain_store_writes_no_seal(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "p.db")) as store:
        await store.create(SessionMeta(id="a"))
        await store.set_head("h", "a")
        assert await store.seal_heads() == 0
    with closing(sqlite3.connect(tmp_path / "p.db")) as connection:
        assert connection.execute("SELECT count(*) FROM head_seals").fetchone() == (0,)
