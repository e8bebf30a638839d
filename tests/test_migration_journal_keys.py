"""Migration 0011: the keyed lines a store already holds are indexed in place.

An effects journal written before the upgrade holds effects done: a
replay after it must find them done, never run them again.
"""

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import Effect, EffectInDoubtError, encode, migrate, open_store
from sessionstore.effects import args_digest
from sessionstore.testing.effects_contract import Tool
from tests.kinds import TEST_KEYS
from tests.test_migrations import alembic

AT = "2026-12-01T00:00:00Z"
DIGEST = args_digest(None)

EFFECT_LINES = [
    encode(Effect(effect="intent", key="mail-1", tool="mail", args=DIGEST, at=AT)),
    encode(Effect(effect="done", key="mail-1", result={"id": 7}, at=AT)),
    encode(Effect(effect="intent", key="mail-2", tool="mail", args=DIGEST, at=AT)),
]
"""An effects journal at the upgrade: one effect done, one in doubt."""

AGENT_LINES: list[bytes | None] = [b'{"key":"old"}', None, b'{"key":"a","n":1}', b"torn {"]
"""A journal with a keyed line before a clear (None), one after, a torn one."""


def rows() -> list[tuple[str, int, bytes | None]]:
    """The rows of ``journal_lines`` a store at 0010 held."""
    found: list[tuple[str, int, bytes | None]] = [
        ("agent/effects", seq, line.encode()) for seq, line in enumerate(EFFECT_LINES, 1)
    ]
    return found + [("agent", seq, line) for seq, line in enumerate(AGENT_LINES, 1)]


async def assert_indexed(target: str) -> None:
    """What the store finds after the upgrade: every keyed line, by key."""
    mail = Tool()
    async with open_store(target) as store:
        journal = store.journal("agent")
        assert await journal.effects.once(mail, tool="mail", key="mail-1") == {"id": 7}
        with pytest.raises(EffectInDoubtError):
            await journal.effects.once(mail, tool="mail", key="mail-2")
        assert mail.runs == 0  # found by the index: nothing runs again
        assert await journal.keyed("a", "old") == {"a": [b'{"key":"a","n":1}']}
        assert [key for key, _ in await journal.scan("")] == ["a"]
        record = await journal.drop("old", "a", reason="after the upgrade")
        assert record is not None
        assert (record.lines, record.keys) == (2, 2)  # the line before the clear too
        assert await journal.read_bytes() == b"torn {\n"
        assert await store.integrity() == []


async def test_the_lines_of_a_sqlite_store_are_indexed_by_the_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    await migrate.upgrade(str(db), "0010")
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.executemany("INSERT INTO journal_lines VALUES (?, ?, ?)", rows())
    upgraded = alembic("-x", f"url=sqlite:///{db}", "upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    await assert_indexed(str(db))


async def test_the_lines_of_a_postgresql_store_are_indexed_by_the_upgrade(
    pg_schemas: Callable[[], str],
) -> None:
    from tests.backends.test_postgres import connect

    url = pg_schemas()
    await migrate.upgrade(url, "0010")
    with connect(url) as connection:
        for row in rows():
            connection.execute("INSERT INTO journal_lines VALUES (%s, %s, %s)", row)
    await migrate.upgrade(url)
    await assert_indexed(url)


async def test_a_sealed_stores_journals_are_indexed_by_its_first_open_with_the_keys(
    tmp_path: Path,
) -> None:
    db, keyring = tmp_path / "sealed.db", str(tmp_path / "store.keys")
    mail = Tool({"id": 7})
    async with open_store(db, keys=TEST_KEYS, keyring=keyring) as store:
        await store.journal("agent").effects.once(mail, tool="mail", key="mail-1")
    # As the upgrade leaves a sealed store: nothing indexed, the journal listed.
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("DELETE FROM journal_keys")
        connection.execute("INSERT INTO journal_unindexed VALUES ('agent/effects')")
    async with open_store(db, keys=TEST_KEYS, keyring=keyring) as store:
        assert await store.journal("agent").effects.once(mail, tool="mail", key="mail-1") == {
            "id": 7
        }
    assert mail.runs == 1
    with closing(sqlite3.connect(db)) as connection:
        assert connection.execute("SELECT * FROM journal_unindexed").fetchall() == []
        (token,) = connection.execute("SELECT DISTINCT key FROM journal_keys").fetchone()
    assert "mail" not in token  # a token, never the key


async def test_the_upgrade_lists_a_sealed_stores_journals_it_cannot_open(tmp_path: Path) -> None:
    db = tmp_path / "sealed-old.db"
    await migrate.upgrade(str(db), "0010")
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("INSERT INTO sealing VALUES (1, 'store', 'scheme')")
        connection.executemany("INSERT INTO journal_lines VALUES (?, ?, ?)", rows())
    await migrate.upgrade(str(db))
    with closing(sqlite3.connect(db)) as connection:
        listed = connection.execute("SELECT journal FROM journal_unindexed ORDER BY 1").fetchall()
        assert listed == [("agent",), ("agent/effects",)]
        assert connection.execute("SELECT count(*) FROM journal_keys").fetchone() == (0,)


async def test_a_downgrade_past_a_drop_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "dropped.db"
    async with open_store(db) as store:
        await store.journal("agent").append_raw(b'{"key":"a"}', b'{"key":"b"}')
        assert await store.journal("agent").drop("a", reason="pruned") is not None
    downgraded = alembic("-x", f"url=sqlite:///{db}", "downgrade", "0010")
    assert downgraded.returncode != 0
    assert "drops of keyed journal lines" in downgraded.stderr
    async with open_store(db) as store:  # still at the head, whole
        assert await store.journal("agent").keyed("a", "b") == {"b": [b'{"key":"b"}']}
