"""Browsing on SQL beyond the contract: a database of revision 0004 upgraded
and listed, pages read from indexes, the mark on PostgreSQL, the new tables'
triggers."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from sessionstore import (
    CompactionEntry,
    InvalidCursorError,
    SessionEntry,
    SessionMeta,
    SqlStore,
    encode,
    migrate,
    open_store,
)
from sessionstore.backends.cursors import Cursor, listing_kind
from sessionstore.backends.sql import browse
from sessionstore.backends.sql.digests import entry_digest, fork_digest, header_digest
from sessionstore.backends.sql.engine import open_sync_engine
from sessionstore.backends.sql.query import Query
from sessionstore.store import Order
from sessionstore.testing.browse import every_page
from sessionstore.testing.contract import message
from tests.helpers import traced
from tests.kinds import StoreTargets

SQL_KINDS = ("sqlite", "postgresql")


async def sql(target: str) -> SqlStore:
    store = await open_store(target)
    assert isinstance(store, SqlStore)
    return store


@contextmanager
def connected(target: str) -> Iterator[Connection]:
    """A plain connection in one transaction, as a tool of that revision would write."""
    engine = open_sync_engine(target)
    try:
        with engine.begin() as connection:
            yield connection
    finally:
        engine.dispose()


# ------------------------------------------------- a database of revision 0004


def store_session(
    connection: Connection,
    header: str,
    entries: list[SessionEntry],
    base: tuple[int, int] | None = None,
) -> int:
    """A session's rows as revision 0004's store wrote them (``base``: a fork's
    base key and shared count); its key."""
    digest = header_digest(header)
    if base is not None:
        shared = connection.execute(
            text("SELECT digest FROM entries WHERE session_pk = :pk AND seq = :seq"),
            {"pk": base[0], "seq": base[1]},
        ).scalar_one()
        digest = fork_digest(header, base[1], bytes(shared))
    session_id = json.loads(header)["id"] if header.startswith("{") else "broken"
    pk = connection.execute(
        text(
            "INSERT INTO sessions (id, version, parent_session, created_at, header, digest, "
            "base_pk, base_seq) VALUES (:id, 1, NULL, '', :header, :digest, :base_pk, :base_seq) "
            "RETURNING pk"
        ),
        {
            "id": session_id,
            "header": header,
            "digest": digest,
            "base_pk": base and base[0],
            "base_seq": base and base[1],
        },
    ).scalar_one()
    for seq, entry in enumerate(entries, (base[1] if base else 0) + 1):
        kept = entry.first_kept_id if isinstance(entry, CompactionEntry) else None
        row = {
            "entry_id": entry.id,
            "type": entry.type,
            "timestamp": entry.timestamp,
            "first_kept_id": kept,
            "line": encode(entry),
        }
        digest = entry_digest(digest, row)
        connection.execute(
            text(
                "INSERT INTO entries (session_pk, seq, entry_id, type, timestamp, first_kept_id, "
                "line, digest) VALUES (:pk, :seq, :entry_id, :type, :timestamp, :first_kept_id, "
                ":line, :digest)"
            ),
            {**row, "pk": pk, "seq": seq, "digest": digest},
        )
    return int(pk)


def populate_0004(target: str) -> None:
    """Sessions (one imported with an ill-typed owner), a fork sharing an
    entry, a head and an erasure, at revision 0004."""
    with connected(target) as connection:
        header = encode(
            SessionMeta(
                id="old", created_at="2026-01-01T00:00:00+00:00", owner="u1", title="Old title"
            )
        )
        store_session(connection, header, [message("o1", "a", "2026-01-05T00:00:00+00:00")])
        recent = store_session(
            connection,
            encode(SessionMeta(id="recent", created_at="2026-01-02T00:00:00+00:00", owner="u2")),
            [
                message("r1", "a", "2026-01-10T00:00:00Z"),
                CompactionEntry(
                    id="r2", timestamp="2026-02-20T00:00:00Z", summary="s", first_kept_id="r1"
                ),
                message("r3", "b", "2026-03-01T00:00:00Z"),
            ],
        )
        store_session(
            connection,
            encode(SessionMeta(id="empty", created_at="2026-02-01T00:00:00+00:00")),
            [],
        )
        fork = SessionMeta(
            id="fork", created_at="2026-02-15T00:00:00+00:00", owner="u2", parent_session="recent"
        )
        store_session(connection, encode(fork), [], base=(recent, 1))
        odd = '{"id":"odd","created_at":"someday","owner":7}'  # owner skipped: ill-typed
        store_session(connection, odd, [])
        connection.execute(
            text("INSERT INTO heads VALUES ('main', 1, 'fork', '2026-02-15T00:00:00+00:00')")
        )
        connection.execute(
            text(
                "INSERT INTO erasures (kind, name, at, reason, lines, digest) "
                "VALUES ('session', 'gone', '2026-01-03T00:00:00Z', 'asked', 0, :digest)"
            ),
            {"digest": "0" * 64},
        )


@pytest.mark.parametrize("kind", SQL_KINDS)
async def test_a_populated_database_at_0004_is_listed_after_the_upgrade(
    store_targets: StoreTargets, kind: str
) -> None:
    target = store_targets.new(kind)
    await migrate.upgrade(target, "0004")
    populate_0004(target)
    await migrate.upgrade(target)
    async with await sql(target) as store:
        # Last activity as the rows tell it: the later of the header's time
        # and the last entry's, a fork's last shared one; a text that is no
        # time counts as the oldest.
        listed = await store.summaries(limit=None)
        assert [s.id for s in listed] == ["recent", "fork", "empty", "old", "odd"]
        assert [s.id for s in await every_page(store, limit=2)] == [s.id for s in listed]
        assert len({s.last_activity for s in listed}) == 1  # the upgrade's time
        created = await store.summaries(order="created", limit=None)
        assert [s.id for s in created] == ["odd", "fork", "empty", "recent", "old"]
        assert [s.id for s in await store.summaries(owner="u2")] == ["recent", "fork"]
        assert [s.id for s in await store.summaries(owner="u1", order="created")] == ["old"]
        by_id = {s.id: s for s in listed}
        assert (by_id["old"].title, await store.titles("old")) == ("Old title", [])
        assert (by_id["recent"].entries, by_id["recent"].compacted) == (3, True)
        fork = by_id["fork"]
        assert (fork.entries, fork.last_timestamp, fork.compacted) == (
            1,
            "2026-01-10T00:00:00Z",
            False,
        )
        assert (by_id["odd"].owner, by_id["odd"].fault) == (None, None)
        assert await store.integrity() == []
        # The store goes on from there: new ticks come after the old ones.
        page = await store.summaries(limit=2)
        await store.append("old", message("o2", "after the upgrade"))
        await store.create(SessionMeta(id="new", owner="u1"))
        await store.set_title("odd", "named at last")
        assert [s.id for s in await store.summaries(limit=None, after=page[-1].cursor)] == [
            "empty",
            "old",
            "odd",
        ]
        listed = await store.summaries(limit=None)
        assert [s.id for s in listed] == ["new", "old", "recent", "fork", "empty", "odd"]
        assert listed[-1].title == "named at last"
        assert await store.head("main") == "fork"
        await store.erase("fork", reason="after the upgrade")
        assert [s.id for s in await store.summaries(owner="u2")] == ["recent"]
        assert await store.integrity() == []


@pytest.mark.parametrize("kind", SQL_KINDS)
async def test_a_header_that_does_not_decode_is_listed_with_its_fault_after_the_upgrade(
    store_targets: StoreTargets, kind: str
) -> None:
    target = store_targets.new(kind)
    await migrate.upgrade(target, "0004")
    with connected(target) as connection:
        store_session(connection, "not json", [message("b1", "x")])
        store_session(connection, encode(SessionMeta(id="fine")), [])
    await migrate.upgrade(target)
    async with await sql(target) as store:
        broken, fine = await store.summaries()
        assert (broken.id, broken.entries, fine.id, fine.fault) == ("broken", 1, "fine", None)
        assert "session 'broken'" in (broken.fault or "")


# ------------------------------------------------------------ pages from indexes


async def test_every_statement_of_a_page_searches_an_index(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with await sql(str(db)) as store:
        for n in range(60):
            await store.create(SessionMeta(id=f"s{n:02}", owner=f"u{n % 3}"))
            await store.append(f"s{n:02}", message("m", "x"))
        await store.fork("s01", meta=SessionMeta(id="f", owner="u1"))
        statements = traced(store)
        paging: list[str] = []  # the statements of the pages, not of the appends between
        orders: tuple[Order, ...] = ("last_activity", "created")
        for owner in (None, "u1"):
            for order in orders:
                start = len(statements)
                page = await store.summaries(owner=owner, order=order, limit=5)
                paging += statements[start:]
                await store.append("s10", message("m2", "moves ahead"))  # a mover
                start = len(statements)
                assert await store.summaries(owner=owner, order=order, after=page[-1].cursor)
                paging += statements[start:]
    reads = [read for read in paging if read.lstrip().upper().startswith("SELECT")]
    assert any("listing" in read for read in reads)
    with closing(sqlite3.connect(db)) as connection:
        for read in reads:
            plan = " | ".join(row[-1] for row in connection.execute(f"EXPLAIN QUERY PLAN {read}"))
            if "LIMIT" in read:  # a first page walks its index in order, up to the limit
                plan = plan.replace("SCAN listing USING INDEX", "walk listing's index")
            assert "SCAN" not in plan, (read, plan)
            assert "TEMP B-TREE" not in plan, (read, plan)  # ordered by the index, no sort


def pg_plan(connection: Any, query: Query, **given: Any) -> str:
    """PostgreSQL's plan of one of the page's statements, run with ``given``."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    compiled = query.statement.compile(dialect=dialect)
    params = {**compiled.params, **given}
    rows = connection.execute(f"EXPLAIN {compiled.string}", params).fetchall()
    return " | ".join(row[0] for row in rows)


async def test_every_statement_of_a_page_searches_an_index_postgresql(pg_url: str) -> None:
    import psycopg

    async with await sql(pg_url) as store:
        for n in range(30):
            await store.create(SessionMeta(id=f"s{n:02}", owner=f"u{n % 3}"))
    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("ANALYZE")
        # Tables this small are read whole when allowed; what matters is
        # that an index answers each statement, in its order, unsorted.
        connection.execute("SET enable_seqscan = off")
        connection.execute("SET enable_bitmapscan = off")
        given = {"mark": 20, "before": 15, "size": 5, "created_at": "z", "session_id": "z"}
        plans = [
            *(pg_plan(connection, q, owner="u1", **given) for q in browse.NEWEST.values()),
            *(pg_plan(connection, q, owner="u1", **given) for q in browse.MOVERS.values()),
            *(pg_plan(connection, q, owner="u1", **given) for q in browse.CREATED.values()),
        ]
    for plan in plans:
        assert "Seq Scan" not in plan, plan
        assert "Sort" not in plan, plan
        assert "Index" in plan, plan


# ------------------------------------------------------ the mark on PostgreSQL


async def test_a_first_page_waits_for_a_write_in_flight_postgresql(pg_url: str) -> None:
    """A tick drawn before a later one committed, and committed after it:
    the first page's mark waits for it, so its session is listed where it
    stands (without the wait, the page would stand below it and skip it)."""
    import psycopg

    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    async with await sql(pg_url) as store:
        for name in ("a", "b", "c"):
            await store.create(SessionMeta(id=name))
        with (
            psycopg.connect(conninfo, autocommit=True) as writer,
            psycopg.connect(conninfo, autocommit=True) as watcher,
        ):
            writer.execute("BEGIN")
            writer.execute(
                "INSERT INTO activity (session_pk, tick, at) "
                "SELECT pk, nextval('activity_ticks'), 'in flight' FROM sessions WHERE id = 'a'"
            )  # draws a tick, not committed yet
            await store.append("c", message("m", "a later tick, committed"))
            first = asyncio.create_task(store.summaries(limit=2))
            waiting = (
                "SELECT count(*) FROM pg_locks "
                "WHERE relation = 'activity'::regclass AND NOT granted"
            )
            # Until the page waits for the writer, or (were it not to) is done:
            # a condition in the server, looked at again and again.
            while True:
                if first.done() or watcher.execute(waiting).fetchone() == (1,):
                    break
                await asyncio.sleep(0.01)
            writer.execute("COMMIT")
            page = await first
        rest = await store.summaries(limit=2, after=page[-1].cursor)
        assert [s.id for s in page + rest] == ["c", "a", "b"]


@pytest.mark.parametrize("kind", SQL_KINDS)
async def test_no_tick_is_given_twice_when_the_newest_session_is_erased(
    store_targets: StoreTargets, kind: str
) -> None:
    async with await sql(store_targets.new(kind)) as store:
        for name in ("a", "b"):
            await store.create(SessionMeta(id=name))
        page = await store.summaries(limit=1)  # stands on b's tick
        await store.erase("b", reason="r")
        # Were b's tick given again, a would take it: not past the mark, yet
        # not below the cursor either, and never listed.
        await store.append("a", message("m", "x"))
        assert [s.id for s in await store.summaries(after=page[-1].cursor)] == ["a"]
        await store.erase("a", reason="r")
        await store.create(SessionMeta(id="c"))  # after the mark: not listed
        assert await store.summaries(after=page[-1].cursor) == []


# ------------------------------------------------------------ cursors and triggers


async def test_a_cursor_whose_tick_passes_its_mark_is_refused(tmp_path: Path) -> None:
    async with await sql(str(tmp_path / "s.db")) as store:
        await store.create(SessionMeta(id="s"))
        kind = listing_kind("summaries", "last_activity", None)
        for mark, tick in (("1", "2"), ("x", "1"), ("1", "")):
            with pytest.raises(InvalidCursorError):
                await store.summaries(after=Cursor(kind, mark, (tick,)).encode())
        assert await store.summaries(after=Cursor(kind, "1", ("1",)).encode()) == []


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE titles SET title = 'x'",
        "DELETE FROM titles",
        "UPDATE activity SET at = 'x'",
        "DELETE FROM activity",
        "DELETE FROM listing",
        "UPDATE listing SET owner = 'someone else'",
        "UPDATE listing SET tick = tick - 1",
        "UPDATE listing SET tick = tick",
    ],
)
@pytest.mark.parametrize("kind", SQL_KINDS)
async def test_raw_writes_to_the_new_tables_fail(
    store_targets: StoreTargets, kind: str, statement: str
) -> None:
    target = store_targets.new(kind)
    async with await sql(target) as store:
        await store.create(SessionMeta(id="s", owner="o"))
        await store.set_title("s", "t")
        await store.append("s", message("m", "x"))
        with pytest.raises(DBAPIError, match="append-only"), connected(target) as connection:
            connection.execute(text(statement))
        if kind == "postgresql":
            for table in ("titles", "activity", "listing"):
                with pytest.raises(DBAPIError, match="append-only"), connected(target) as conn:
                    conn.execute(text(f"TRUNCATE {table}"))
        assert [(s.id, s.owner, s.title) for s in await store.summaries()] == [("s", "o", "t")]
        assert await store.integrity() == []


async def test_integrity_names_a_session_the_listing_lost(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with await sql(str(db)) as store:
        await store.create(SessionMeta(id="kept"))
        await store.create(SessionMeta(id="lost"))
        await store.append("kept", message("m", "x"))
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("DROP TRIGGER listing_no_delete")  # only a test may do this
        connection.execute("DROP TRIGGER listing_no_update")
        connection.execute("DELETE FROM listing WHERE session_id = 'lost'")
        connection.execute("UPDATE listing SET tick = tick + 100 WHERE session_id = 'kept'")
    async with await sql(str(db)) as store:
        assert await store.integrity() == [
            "session 'lost': not listed (summaries would leave it out)",
            "session 'kept': listed at another write than its last activity",
        ]


async def test_erased_titles_and_owners_are_nowhere_in_the_database(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    title, owner = (f"MARK{n}-{uuid.uuid4().hex}" for n in "TO")
    async with await sql(str(db)) as store:
        await store.create(SessionMeta(id="kept", owner="someone"))
        await store.create(SessionMeta(id="doomed", owner=owner))
        await store.set_title("doomed", title)
        await store.append("doomed", message("m", "x"))
        assert [s.title for s in await store.summaries(owner=owner)] == [title]
        for marker in (title, owner):
            assert marker.encode() in stored_bytes(db)
        await store.erase("doomed", reason="the user asked")
        for marker in (title, owner):
            assert marker.encode() not in stored_bytes(db), marker
        assert await store.summaries(owner=owner) == []
        assert [s.id for s in await store.summaries()] == ["kept"]
        assert await store.integrity() == []
    with closing(sqlite3.connect(db)) as connection:
        for table in ("titles", "activity", "listing"):
            rows = connection.execute(
                f"SELECT count(*) FROM {table} WHERE session_pk NOT IN (SELECT pk FROM sessions)"
            )
            assert rows.fetchone() == (0,), table


def stored_bytes(db: Path) -> bytes:
    """Everything SQLite keeps for ``db``: the file, its WAL and its index."""
    parts = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    return b"".join(part.read_bytes() for part in parts if part.exists())
