"""SqlStore on SQLite beyond the contract: schema, pragmas, append-only, processes."""

import asyncio
import signal
import sqlite3
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    ConfigurationError,
    CorruptSessionError,
    Message,
    MessageEntry,
    SessionEntry,
    SessionMeta,
    SessionNotFoundError,
    SqlStore,
    StorageError,
    encode,
    open_store,
)
from sessionstore.testing.contract import compaction, message
from tests.helpers import APPENDER, ForkServer, run_appenders, traced


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
async def store(db: Path) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(f"sqlite:///{db}")
    yield store
    await store.close()


def raw(db: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection, as any tool or person could open."""
    return sqlite3.connect(db, isolation_level=None)


async def test_database_is_in_wal_mode_and_private(store: SqlStore, db: Path) -> None:
    await store.create(SessionMeta.new())
    assert raw(db).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    wal = db.with_name(db.name + "-wal")
    assert stat.S_IMODE(wal.stat().st_mode) == 0o600


@pytest.mark.parametrize(("durability", "level"), [("normal", 1), ("full", 2)])
async def test_durability_sets_synchronous(db: Path, durability: str, level: int) -> None:
    store = await SqlStore.open(str(db), durability=durability)  # type: ignore[arg-type]
    with store.database.runner.sync_engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == level
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    await store.close()


async def test_rows_keep_lines_verbatim_with_gap_free_seq(store: SqlStore, db: Path) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    logged: list[SessionEntry] = [
        message("e1", "a"),
        message("e2", "b"),
        compaction("c1", "sum", "e2"),
    ]
    for entry in logged:
        await store.append(meta.id, entry)
    connection = raw(db)
    assert connection.execute("SELECT header FROM sessions").fetchall() == [(encode(meta),)]
    rows = connection.execute(
        "SELECT seq, entry_id, type, first_kept_id, line FROM entries ORDER BY seq"
    ).fetchall()
    assert rows == [
        (1, "e1", "message", None, encode(logged[0])),
        (2, "e2", "message", None, encode(logged[1])),
        (3, "c1", "compaction", "e2", encode(logged[2])),
    ]


@pytest.mark.parametrize("table", ["sessions", "entries", "journal_lines"])
@pytest.mark.parametrize("statement", ["UPDATE {table} SET rowid = rowid", "DELETE FROM {table}"])
async def test_raw_update_and_delete_fail_on_every_table(
    store: SqlStore, db: Path, table: str, statement: str
) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append(meta.id, message("e1", "x"))
    connection = raw(db)
    connection.execute("INSERT INTO journal_lines (journal, seq, line) VALUES ('j', 1, x'00')")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(statement.format(table=table))
    assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)


async def test_corrupt_row_is_an_error_naming_session_and_line(store: SqlStore, db: Path) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(meta.id, [message("e1", "a"), message("e2", "b")])
    connection = raw(db)
    connection.execute("DROP TRIGGER entries_no_update")  # only a test may do this
    connection.execute("UPDATE entries SET line = 'garbage' WHERE seq = 2")
    with pytest.raises(CorruptSessionError, match="invalid JSON") as caught:
        await store.load(meta.id)
    assert (caught.value.session_id, caught.value.line) == (meta.id, 3)


async def test_a_header_that_does_not_decode_is_an_error_naming_its_session(
    store: SqlStore, db: Path
) -> None:
    first, second = SessionMeta.new(), SessionMeta.new()
    await store.create(first)
    await store.create(second)
    assert [m.id for m in await store.list()] == [first.id, second.id]
    connection = raw(db)
    connection.execute("DROP TRIGGER sessions_no_update")  # only a test may do this
    connection.execute("UPDATE sessions SET header = '{\"id\":1}' WHERE id = ?", (second.id,))
    # This store keeps the headers it listed (they never change, but here);
    # a store opened on the database after the change reads it.
    async with await SqlStore.open(f"sqlite:///{db}") as reopened:
        with pytest.raises(CorruptSessionError) as caught:
            await reopened.list()
    assert caught.value.session_id == second.id
    assert "sessions" in str(caught.value)


async def test_list_sees_the_sessions_another_store_object_creates(db: Path) -> None:
    async with await SqlStore.open(str(db)) as store, await SqlStore.open(str(db)) as other:
        made = [await store.create(SessionMeta.new())]
        assert [m.id for m in await store.list()] == made
        for n in range(3):
            made.append(await other.create(SessionMeta(id=f"other-{n}")))
            assert [m.id for m in await store.list()] == made
            assert [m.id for m in await store.list()] == made  # asked again, kept
        # Asked again with no new session, the count alone is read.
        statements = traced(store)
        assert [m.id for m in await store.list()] == made
        assert not [sql for sql in statements if "header" in sql], statements


async def test_list_reads_all_again_when_a_session_committed_out_of_key_order(
    store: SqlStore, db: Path
) -> None:
    # On PostgreSQL a session can commit after one with a greater pk; here
    # a row is put below the greatest pk by hand, as such a commit would.
    first = await store.create(SessionMeta(id="first"))
    connection = raw(db)
    insert = "INSERT INTO sessions (pk, id, version, created_at, header) VALUES (?, ?, 3, 't', ?)"
    late = SessionMeta(id="late")
    connection.execute(insert, (10, "tenth", encode(SessionMeta(id="tenth"))))
    assert [m.id for m in await store.list()] == [first, "tenth"]
    connection.execute(insert, (5, late.id, encode(late)))
    assert [m.id for m in await store.list()] == [first, "late", "tenth"]
    assert (await store.list())[1] == late


async def test_a_header_naming_another_session_is_an_integrity_fault(
    store: SqlStore, db: Path
) -> None:
    first, second = SessionMeta.new(), SessionMeta.new()
    await store.create(first)
    await store.create(second)
    connection = raw(db)
    connection.execute("DROP TRIGGER sessions_no_update")  # only a test may do this
    connection.execute("UPDATE sessions SET header = ? WHERE id = ?", (encode(first), second.id))
    faults = await store.integrity()
    assert len(faults) == 2
    assert second.id in faults[0]
    assert f"header names session {first.id!r}" in faults[0]
    assert faults[1] == (
        f"session {second.id!r}: its header does not match its digest: "
        "its row changed after it was written"
    )


async def test_load_context_reads_nothing_before_the_cut(store: SqlStore, db: Path) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    log: list[SessionEntry] = [message(f"old{n}", "old") for n in range(50)]
    log += [message("kept", "kept"), message("tail", "tail"), compaction("c1", "sum", "kept")]
    await store.append_many(meta.id, log)
    connection = raw(db)
    connection.execute("DROP TRIGGER entries_no_update")
    # Corrupt every row before the cut: load_context must not even read them.
    connection.execute("UPDATE entries SET line = 'garbage' WHERE seq <= 50")
    context = await store.load_context(meta.id)
    assert [m.text() for m in context] == ["[Conversation summary]\nsum", "kept", "tail"]
    with pytest.raises(CorruptSessionError):
        await store.load(meta.id)


async def test_load_context_statements_search_indexes_never_scan(store: SqlStore, db: Path) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    log: list[SessionEntry] = [message(f"e{n}", "x") for n in range(2000)]
    await store.append_many(meta.id, [*log, compaction("c1", "sum", "e1990")])
    statements = traced(store)
    await store.load_context(meta.id)
    plans = [
        " | ".join(row[-1] for row in raw(db).execute(f"EXPLAIN QUERY PLAN {sql}"))
        for sql in statements
        if sql.lstrip().upper().startswith("SELECT") and "entries" in sql
    ]
    assert len(plans) == 3, plans  # the last seq, the last compaction, the kept messages
    for plan in plans:
        assert "SCAN" not in plan, plan
    assert "ix_entries_compactions" in plans[1]
    assert "ix_entries_entry_id (session_pk=? AND entry_id=?" in plans[2]
    # Asked again, nothing new: the last seq alone is read.
    statements.clear()
    await store.load_context(meta.id)
    assert [sql for sql in statements if "entries" in sql] == [
        sql for sql in statements if "max(entries.seq)" in sql
    ]
    assert len([sql for sql in statements if "entries" in sql]) == 1


async def test_store_survives_reopening_and_lists_in_creation_order(db: Path) -> None:
    async with open_store(db) as store:
        ids = [await store.create(SessionMeta(id=f"s{n}")) for n in (3, 1, 2)]
    async with open_store(f"sqlite+aiosqlite:///{db}") as store:
        assert [m.id for m in await store.list()] == ids


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite+pysqlcipher:///x.db", "unsupported SQLite driver"),
    ],
)
async def test_unusable_sqlite_targets_are_refused(target: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        await open_store(target)


async def test_missing_directory_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot create database"):
        await open_store(tmp_path / "nowhere" / "x.db")


async def test_bad_options_are_refused(db: Path) -> None:
    with pytest.raises(ConfigurationError, match="durability"):
        await open_store(db, durability="eventually")
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        await open_store(db, busy_timeout=-1)


async def test_four_processes_appending_to_one_session_give_seq_1_to_2000(
    store: SqlStore, db: Path
) -> None:
    session_id = await store.create(SessionMeta.new())
    await run_appenders(f"sqlite:///{db}", session_id, ["a", "b", "c", "d"], 500)
    seqs = [row[0] for row in raw(db).execute("SELECT seq FROM entries ORDER BY seq")]
    assert seqs == list(range(1, 2001))
    texts = [e.message.text() for e in await store.load(session_id) if isinstance(e, MessageEntry)]
    for worker in "abcd":
        assert [int(t.split(":")[1]) for t in texts if t[0] == worker] == list(range(500))


async def test_appends_that_returned_survive_sigkill_20_times(store: SqlStore, db: Path) -> None:
    session_id = await store.create(SessionMeta.new())
    target = f"sqlite:///{db}"
    returned = 0
    async with ForkServer(APPENDER) as server:
        for round_ in range(20):
            worker = await server.run(target, session_id, f"r{round_}", "100000", "200")
            # Let it append for a while, then kill it mid-stream.
            acknowledged = []
            for _ in range(5 + round_ * 3):
                acknowledged.append(await worker.readline())
            worker.kill()
            rest = await worker.read()
            assert await worker.wait() == -signal.SIGKILL
            done = len(acknowledged) + len(rest.split())
            returned += done

            loaded = await store.load(session_id)
            mine = [
                e.message.text().split(":")[1]
                for e in loaded
                if isinstance(e, MessageEntry) and e.message.text().startswith(f"r{round_}:")
            ]
            # Every append that had returned is there; at most the one in flight more.
            assert mine[:done] == [str(n) for n in range(done)]
            assert len(mine) in (done, done + 1)
    connection = raw(db)
    assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    seqs = [row[0] for row in connection.execute("SELECT seq FROM entries ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) >= returned


async def test_concurrent_tasks_across_two_store_objects_never_collide(db: Path) -> None:
    first = await SqlStore.open(str(db))
    second = await SqlStore.open(str(db))
    session_id = await first.create(SessionMeta.new())

    async def writer(store: SqlStore, name: str) -> None:
        for n in range(30):
            await store.append(session_id, MessageEntry.new(Message.user(f"{name}{n}")))

    await asyncio.gather(*(writer(s, f"{i}-") for i, s in enumerate([first, second] * 5)))
    seqs = [row[0] for row in raw(db).execute("SELECT seq FROM entries ORDER BY seq")]
    assert seqs == list(range(1, 301))
    await first.close()
    await second.close()


async def test_journal_clear_is_a_marker_and_history_stays(store: SqlStore, db: Path) -> None:
    journal = store.journal("agent")
    await journal.append_raw(b"first")
    await journal.clear()
    await journal.clear()  # nothing new to clear: no second marker
    await journal.append_raw(b"second")
    rows = raw(db).execute("SELECT journal, seq, line FROM journal_lines ORDER BY seq").fetchall()
    assert rows == [("agent", 1, b"first"), ("agent", 2, None), ("agent", 3, b"second")]
    assert (await journal.read()).skipped == [1]


async def test_journal_commits_with_a_full_fsync_even_at_normal_durability(
    store: SqlStore,
) -> None:
    await store.journal("first").append_raw(b"x")  # the writer's connection now at FULL
    threads: list[str] = []
    statements = traced(store, threads)
    await store.create(SessionMeta(id="s"))
    await store.journal("agent").append_raw(b"x")
    await store.append("s", message("e1", "x"))
    await store.journal("agent").clear()
    # Each commit, with the synchronous level the writer's connection was
    # set to last.
    levels, level = [], {"sessionstore-sql-writer-0": "FULL"}
    for sql, thread in zip(statements, threads, strict=True):
        if sql.startswith("PRAGMA synchronous="):
            level[thread] = sql.split("=")[1]
        elif sql == "COMMIT":
            levels.append((level.get(thread, "NORMAL"), "writer" in thread))
    # All in the writer thread: the create and the append at the store's level.
    assert levels == [("NORMAL", True), ("FULL", True), ("NORMAL", True), ("FULL", True)]


async def test_appends_that_arrive_together_share_a_commit(store: SqlStore) -> None:
    session_id = await store.create(SessionMeta.new())
    statements = traced(store)
    await asyncio.gather(*(store.append(session_id, message(f"e{n}", "x")) for n in range(50)))
    assert len(await store.load(session_id)) == 50
    assert 0 < statements.count("COMMIT") < 50


async def test_a_failing_append_in_a_shared_commit_fails_only_its_caller(
    store: SqlStore,
) -> None:
    session_id = await store.create(SessionMeta.new())
    results = await asyncio.gather(
        store.append(session_id, message("e1", "x")),
        store.append("missing", message("e2", "x")),
        store.append_many(session_id, [message("e3", "x"), message("e4", "x")]),
        return_exceptions=True,
    )
    assert results[0] is None
    assert isinstance(results[1], SessionNotFoundError)
    assert results[2] is None
    assert [e.id for e in await store.load(session_id)] == ["e1", "e3", "e4"]


async def test_a_shared_commit_over_many_sessions_keeps_each_in_order(store: SqlStore) -> None:
    first, second = await store.create(SessionMeta.new()), await store.create(SessionMeta.new())
    await asyncio.gather(
        store.append_many(second, [message("b1", "x"), message("b2", "x")]),
        store.append(first, message("a1", "x")),
        store.append("missing", message("m1", "x")),
        store.append_many(first, [message("a2", "x"), message("a3", "x")]),
        store.append(second, message("b3", "x")),
        return_exceptions=True,
    )
    assert [e.id for e in await store.load(first)] == ["a1", "a2", "a3"]
    assert [e.id for e in await store.load(second)] == ["b1", "b2", "b3"]
    assert await store.integrity() == []  # seq runs 1, 2, 3 in each


async def test_a_cancelled_append_leaves_the_others_to_commit(store: SqlStore) -> None:
    session_id = await store.create(SessionMeta.new())
    leader = asyncio.create_task(store.append(session_id, message("lead", "x")))
    await asyncio.sleep(0)  # the leader is now running its own transaction
    followers = [
        asyncio.create_task(store.append(session_id, message(f"f{n}", "x"))) for n in range(5)
    ]
    await asyncio.sleep(0)  # they wait for the next one
    leader.cancel()
    await asyncio.wait_for(asyncio.gather(*followers), timeout=10)
    ids = [e.id for e in await store.load(session_id)]
    assert [i for i in ids if i != "lead"] == [f"f{n}" for n in range(5)]
    assert ids.count("lead") <= 1  # its caller gave up; it may or may not stand
    assert await store.integrity() == []
    await store.append(session_id, message("after", "x"))
    assert (await store.load(session_id))[-1].id == "after"


async def test_load_decodes_in_a_thread_leaving_the_event_loop_free(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sessionstore.backends.sql.store as store_module

    session_id = await store.create(SessionMeta.new())
    await store.append_many(session_id, [message(f"e{n}", "x") for n in range(100)])
    decoding: list[str] = []
    decode = store_module.decode_stored_entries  # type: ignore[attr-defined]

    def recorded(*args: Any, **kwargs: Any) -> list[SessionEntry]:
        decoding.append(threading.current_thread().name)
        return decode(*args, **kwargs)

    monkeypatch.setattr(store_module, "decode_stored_entries", recorded)
    assert [e.id for e in await store.load(session_id)] == [f"e{n}" for n in range(100)]
    assert len(decoding) == 1
    assert decoding[0] != threading.main_thread().name
