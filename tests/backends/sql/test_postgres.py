"""SqlStore on PostgreSQL beyond the contract: triggers, processes, migrations."""

import glob
import subprocess
from collections.abc import AsyncIterator, Callable
from functools import partial

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from sessionstore import MessageEntry, SessionMeta, SqlStore, encode, migrate, open_store
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.runner import Kind
from sessionstore.testing.contract import message
from tests.backends.sql.helpers import connect
from tests.helpers import alembic, run_appenders


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[SqlStore]:
    opened = await open_store(pg_url)
    assert isinstance(opened, SqlStore)
    yield opened
    await opened.close()


@pytest.mark.parametrize("table", ["sessions", "entries", "journal_lines", "heads"])
@pytest.mark.parametrize(
    "statement", ["UPDATE {table} SET seq = seq", "DELETE FROM {table}", "TRUNCATE {table} CASCADE"]
)
async def test_raw_update_delete_and_truncate_fail_on_every_table(
    store: SqlStore, pg_url: str, table: str, statement: str
) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append(meta.id, message("e1", "x"))
    await store.journal("agent").append_raw(b"line")
    await store.set_head("chat", meta.id)
    if table == "sessions":
        statement = statement.replace("seq = seq", "pk = pk")
    with connect(pg_url) as connection:
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            connection.execute(statement.format(table=table))
        assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)


async def test_eight_processes_appending_to_one_session_give_seq_1_to_2000(
    store: SqlStore, pg_url: str
) -> None:
    session_id = await store.create(SessionMeta.new())
    await run_appenders(pg_url, session_id, [f"w{n}" for n in range(8)], 250)
    with connect(pg_url) as connection:
        seqs = [row[0] for row in connection.execute("SELECT seq FROM entries ORDER BY seq")]
    assert seqs == list(range(1, 2001))
    texts = [e.message.text() for e in await store.load(session_id) if isinstance(e, MessageEntry)]
    for worker in range(8):
        own = [int(t.split(":")[1]) for t in texts if t.startswith(f"w{worker}:")]
        assert own == list(range(250))
    assert await store.integrity() == []


async def test_reads_run_without_begin_and_commit_and_locked_reads_and_writes_in_transactions(
    store: SqlStore,
) -> None:
    # At READ COMMITTED each statement has a snapshot of its own anyway:
    # a read spares the BEGIN and COMMIT round trips.
    seen: list[tuple[str, bool]] = []

    def body(kind: str, conn: Connection) -> None:
        Q.HEAD_NAMES.all(conn)
        driver = conn.connection.dbapi_connection
        assert isinstance(driver, psycopg.Connection)
        seen.append((kind, driver.info.transaction_status == TransactionStatus.INTRANS))

    transaction = store.database.transaction
    await transaction(Kind.READ, None, partial(body, "read"))
    await transaction(Kind.LOCKED_READ, None, partial(body, "locked read"))
    await transaction(Kind.WRITE, None, partial(body, "write"))
    await transaction(Kind.READ, None, partial(body, "read again"))
    assert seen == [("read", False), ("locked read", True), ("write", True), ("read again", False)]
    meta = SessionMeta.new()  # and the store works on, on the same connections
    await store.create(meta)
    await store.append(meta.id, message("e1", "x"))
    assert [entry.id for entry in (await store.load_slice(meta.id, 0)).entries] == ["e1"]


async def test_integrity_finds_a_gap_in_seq(store: SqlStore, pg_url: str) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(meta.id, [message(f"e{n}", "x") for n in range(3)])
    with connect(pg_url) as connection:
        connection.execute("ALTER TABLE entries DISABLE TRIGGER entries_no_delete")
        connection.execute("DELETE FROM entries WHERE seq = 2")
    assert await store.integrity() == [
        f"session {meta.id!r}: 2 entries but seq runs 1..3",
        # The chain of digests skips the missing row: it breaks at the next.
        f"session {meta.id!r}: entry 3 ('e2') does not match its digest: "
        "its row changed after it was written",
        # Its row in the word index stays, naming no entry.
        f"session {meta.id!r}: the word index does not hold the words of its entry 2 "
        "(search would miss or invent hits; docs/sql.md, Search, says how to rebuild it)",
    ]


async def test_list_sees_a_session_that_committed_after_one_with_a_greater_pk(
    store: SqlStore, pg_url: str
) -> None:
    late = SessionMeta(id="late")
    with connect(pg_url) as connection, connection.transaction():
        # Takes its pk now, commits at the end of the block.
        connection.execute(
            "INSERT INTO sessions (id, version, created_at, header) VALUES (%s, 3, 't', %s)",
            (late.id, encode(late)),
        )
        await store.create(SessionMeta(id="early"))
        assert [m.id for m in await store.list()] == ["early"]
    assert [m.id for m in await store.list()] == ["late", "early"]  # pk order


def test_alembic_round_trip_on_postgresql(pg_url: str) -> None:
    url = f"url={pg_url}"
    upgraded = alembic("-x", url, "upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    assert alembic("-x", url, "downgrade", "base").returncode == 0
    with connect(pg_url) as connection:
        tables = {
            row[0]
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        }
        functions = connection.execute(
            "SELECT count(*) FROM pg_proc JOIN pg_namespace n ON n.oid = pronamespace "
            "WHERE proname = 'sessionstore_append_only' AND nspname = current_schema()"
        ).fetchone()
    assert tables.isdisjoint({"sessions", "entries", "journal_lines"})
    assert functions == (0,)
    assert alembic("-x", url, "upgrade", "head").returncode == 0


def dump(url: str) -> list[str]:
    """pg_dump of the test's schema, objects and rows, its name made neutral."""
    target = make_url(url)
    schema = str(target.query["options"]).removeprefix("-csearch_path=")
    server = target.difference_update_query(["options"]).set(drivername="postgresql")
    # The newest installed, as .ci/postgres picks its binaries.
    pg_dump = max(
        glob.glob("/usr/lib/postgresql/*/bin/pg_dump"), key=lambda p: int(p.split("/")[4])
    )
    dumped = subprocess.run(
        [pg_dump, "--no-owner", "-n", schema, server.render_as_string(hide_password=False)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        line.replace(schema, "SCHEMA")
        for line in dumped.splitlines()
        if not line.startswith(("\\restrict", "\\unrestrict", "-- Dumped"))
    ]


async def test_a_new_postgresql_store_is_the_schema_the_migrations_make(
    pg_schemas: Callable[[], str],
) -> None:
    migrated, first, replayed = pg_schemas(), pg_schemas(), pg_schemas()
    await migrate.upgrade(migrated)  # alembic, revision by revision
    for url in (first, replayed):  # the second at least is the migrations replayed
        async with open_store(url):
            pass
    made = dump(migrated)
    assert any(line.startswith("CREATE TRIGGER") for line in made)
    assert any("sessionstore_alembic_version" in line for line in made)
    assert dump(replayed) == made


async def test_upgrade_from_code_on_postgresql(pg_url: str) -> None:
    assert await migrate.current(pg_url) is None
    await migrate.upgrade(pg_url)
    assert await migrate.current(pg_url) == migrate.head()


async def test_a_populated_database_at_0001_is_upgraded_in_place_on_postgresql(
    pg_url: str,
) -> None:
    await migrate.upgrade(pg_url, "0001")
    header = encode(SessionMeta(id="s", created_at="2026-01-01T00:00:00Z"))
    lines = [encode(message(f"e{n}", f"text {n}")) for n in range(3)]
    with connect(pg_url) as connection:
        inserted = connection.execute(
            "INSERT INTO sessions (id, version, created_at, header) VALUES ('s', 1, '', %s) "
            "RETURNING pk",
            (header,),
        ).fetchone()
        assert inserted is not None
        (pk,) = inserted
        for seq, line in enumerate(lines, 1):
            connection.execute(
                "INSERT INTO entries (session_pk, seq, entry_id, type, timestamp, line) "
                "VALUES (%s, %s, %s, 'message', '2026-07-19T00:00:00+00:00', %s)",
                (pk, seq, f"e{seq - 1}", line),
            )
    await migrate.upgrade(pg_url)
    async with open_store(pg_url) as store:
        assert [line async for line in store.raw_lines("s")] == [header, *lines]
        assert await store.integrity() == []
        await store.append("s", message("e3", "after the upgrade"))
        fork = await store.fork("s", at="e1")
        await store.append(fork.id, message("f", "on the fork"))
        assert [line async for line in store.raw_lines(fork.id)] == [
            encode(fork),
            *lines[:2],
            encode(message("f", "on the fork")),
        ]
        assert await store.integrity() == []
    async with open_store(pg_url) as store:
        erased = await store.erase(fork.id, reason="after the upgrade")
        assert (erased.kind, erased.lines) == ("session", 3)
        assert await store.erasures() == [erased]
        assert await store.integrity() == []
    connection = connect(pg_url)
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        connection.execute("UPDATE entries SET digest = NULL")  # the triggers are back
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        connection.execute("DELETE FROM entries")  # only an erase deletes
    connection.close()


@pytest.mark.parametrize(
    "statement",
    ["DELETE FROM entries", "DELETE FROM sessions", "DELETE FROM erasures", "TRUNCATE erasures"],
)
async def test_raw_deletes_fail_even_after_an_erasure_of_that_id(
    store: SqlStore, pg_url: str, statement: str
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.erase("s", reason="first")  # committed: its xmin is not a later transaction's
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e1", "x"))
    with (
        connect(pg_url) as connection,
        pytest.raises(psycopg.errors.RaiseException, match="append-only"),
    ):
        connection.execute(statement)
    assert len(await store.load("s")) == 1
    assert len(await store.erasures()) == 1
