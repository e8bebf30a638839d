"""History cannot be rewritten on SQL, and what changes anyway is named by verify."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from sessionstore import (
    CorruptSessionError,
    SessionMeta,
    SessionStore,
    SqlStore,
    encode,
    open_store,
)
from sessionstore.testing.contract import message
from tests.kinds import StoreTargets

ENTRY = "(session_pk, seq, entry_id, type, timestamp, line)"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


@pytest.fixture
async def store(db: Path) -> AsyncIterator[SqlStore]:
    async with await SqlStore.open(str(db)) as store:
        yield store


async def two_entries(store: SessionStore) -> str:
    session_id = await store.create(SessionMeta(id="s"))
    await store.append_many(session_id, [message("e1", "hello"), message("e2", "world")])
    return session_id


def forged(seq: int) -> tuple[int, int, str, str, str, str]:
    return (1, seq, f"e{seq}", "message", "t", encode(message(f"e{seq}", "forged")))


REPLACING = [
    f"INSERT OR REPLACE INTO entries {ENTRY} VALUES (?, ?, ?, ?, ?, ?)",
    f"REPLACE INTO entries {ENTRY} VALUES (?, ?, ?, ?, ?, ?)",
    f"INSERT INTO entries {ENTRY} VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (session_pk, seq) DO UPDATE SET line = excluded.line",
]


@pytest.mark.parametrize("recursive_triggers", ["ON", "OFF"])
@pytest.mark.parametrize("statement", REPLACING)
async def test_no_insert_replaces_an_entry_on_sqlite(
    store: SqlStore, db: Path, statement: str, recursive_triggers: str
) -> None:
    session_id = await two_entries(store)
    before = [line async for line in store.raw_lines(session_id)]
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute(f"PRAGMA recursive_triggers={recursive_triggers}")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(statement, forged(1))
    assert [line async for line in store.raw_lines(session_id)] == before
    assert await store.integrity() == []


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT OR REPLACE INTO sessions (pk, id, version, created_at, header) "
        "VALUES (1, 'other', 1, '', '{\"id\":\"other\"}')",
        "REPLACE INTO sessions (id, version, created_at, header) "
        'VALUES (\'s\', 1, \'forged\', \'{"id":"s","created_at":"forged"}\')',
        "INSERT OR REPLACE INTO journal_lines (journal, seq, line) VALUES ('j', 1, x'00')",
        "UPDATE OR REPLACE entries SET seq = 1 WHERE seq = 2",
        "UPDATE OR REPLACE sessions SET header = 'x'",
    ],
)
async def test_no_statement_replaces_a_session_or_journal_row_on_sqlite(
    store: SqlStore, db: Path, statement: str
) -> None:
    session_id = await two_entries(store)
    await store.journal("j").append_raw(b"first")
    before = [line async for line in store.raw_lines(session_id)]
    connection = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(statement)
    assert [line async for line in store.raw_lines(session_id)] == before
    assert await store.journal("j").read_bytes() == b"first\n"


async def test_an_upsert_cannot_rewrite_an_entry_on_postgresql(pg_url: str) -> None:
    async with await SqlStore.open(pg_url) as store:
        session_id = await two_entries(store)
        before = [line async for line in store.raw_lines(session_id)]
        upsert = (
            f"INSERT INTO entries {ENTRY} VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (session_pk, seq) DO UPDATE SET line = excluded.line"
        )
        conninfo = pg_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(conninfo) as connection:
            pk = connection.execute("SELECT pk FROM sessions").fetchone()
            assert pk is not None
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                connection.execute(upsert, (pk[0], *forged(1)[1:]))
        assert [line async for line in store.raw_lines(session_id)] == before


async def test_a_flipped_byte_in_the_database_file_is_named_by_integrity(
    store: SqlStore, db: Path
) -> None:
    session_id = await store.create(SessionMeta(id="s"))
    await store.append_many(session_id, [message(f"e{n}", f"text number {n}") for n in range(5)])
    await store.close()
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    data = bytearray(db.read_bytes())
    at = data.index(b"text number 3")
    data[at] ^= 0x01  # "t" becomes "u": still valid JSON, still valid UTF-8
    db.write_bytes(bytes(data))
    async with await SqlStore.open(str(db)) as reopened:
        assert await reopened.integrity() == [
            "session 's': entry 4 ('e3') does not match its digest: "
            "its row changed after it was written"
        ]


async def test_only_the_first_changed_entry_of_a_session_is_named(
    store: SqlStore, db: Path
) -> None:
    session_id = await store.create(SessionMeta(id="s"))
    await store.append_many(session_id, [message(f"e{n}", "x") for n in range(5)])
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("DROP TRIGGER entries_no_update")  # only a test may do this
    connection.execute("UPDATE entries SET line = replace(line, '\"x\"', '\"y\"') WHERE seq >= 2")
    faults = await store.integrity()
    assert faults == [
        "session 's': entry 2 ('e1') does not match its digest: "
        "its row changed after it was written"
    ]


async def test_a_row_inserted_without_a_digest_is_a_fault_and_refuses_appends(
    store: SqlStore, db: Path
) -> None:
    session_id = await two_entries(store)
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute(f"INSERT INTO entries {ENTRY} VALUES (?, ?, ?, ?, ?, ?)", forged(3))
    assert await store.integrity() == ["session 's': entry 3 ('e3') has no digest"]
    with pytest.raises(CorruptSessionError) as caught:
        await store.append(session_id, message("e4", "more"))
    assert str(caught.value) == "session 's': entry 3 has no digest to chain from"
    other = await store.create(SessionMeta(id="other"))
    await store.append(other, message("o1", "unaffected"))  # others still append


async def test_a_session_row_without_a_digest_refuses_its_first_append(
    store: SqlStore, db: Path
) -> None:
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute(
        "INSERT INTO sessions (id, version, created_at, header) VALUES ('bare', 1, '', ?)",
        (encode(SessionMeta(id="bare")),),
    )
    with pytest.raises(CorruptSessionError) as caught:
        await store.append("bare", message("e1", "first"))
    assert str(caught.value) == "session 'bare': its header has no digest to chain from"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_position_deleted_from_a_head_or_titles_history_is_a_fault(
    store_targets: StoreTargets, kind: str
) -> None:
    target = store_targets.new(kind)
    async with await open_store(target) as store:
        session_id = await two_entries(store)
        for n in range(3):
            await store.set_head("main", session_id)
            await store.set_title(session_id, f"title {n}")
    statements = [
        "DELETE FROM heads WHERE seq = 1",
        "DELETE FROM titles WHERE seq = 2",
    ]
    if kind == "sqlite":
        database = make_url(target).database
        assert database is not None
        with closing(sqlite3.connect(database, isolation_level=None)) as connection:
            for table in ("heads", "titles"):
                connection.execute(f"DROP TRIGGER {table}_no_delete")
            for statement in statements:
                connection.execute(statement)
    else:
        conninfo = make_url(target).set(drivername="postgresql")
        with psycopg.connect(conninfo.render_as_string(hide_password=False)) as connection:
            connection.execute("SET session_replication_role = replica")
            for statement in statements:
                connection.execute(statement)
    async with await open_store(target) as store:
        assert await store.integrity() == [
            "head 'main': 2 positions but seq runs to 3 (a position was deleted)",
            "session 's': 2 title changes but seq runs to 3 (a change was deleted)",
        ]
