"""Forks and heads on SQL beyond the contract: what a fork stores, its chain
of digests, the append-only heads table, and processes forking at once."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessionstore import MessageEntry, SessionMeta, SqlStore, open_store
from sessionstore.testing.contract import message
from tests.helpers import WORKERS, ForkServer
from tests.kinds import StoreTargets


def sqlite_connection(db: Path) -> contextlib.closing[sqlite3.Connection]:
    """A plain connection to the database file, as any tool could open."""
    return contextlib.closing(sqlite3.connect(db, isolation_level=None))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


@pytest.fixture
async def store(db: Path) -> AsyncIterator[SqlStore]:
    async with await SqlStore.open(str(db)) as store:
        yield store


def rows(db: Path, query: str, *args: object) -> list[Any]:
    with sqlite_connection(db) as connection:
        return connection.execute(query, args).fetchall()


async def test_a_fork_stores_its_header_and_branch_point_and_no_entry(
    store: SqlStore, db: Path
) -> None:
    source = await store.create(SessionMeta(id="source"))
    await store.append_many(source, [message(f"e{n}", "x" * 100) for n in range(3000)])
    entries_before = rows(db, "SELECT count(*) FROM entries")
    fork = await store.fork(source, at="e1999", meta=SessionMeta(id="fork"))
    assert rows(db, "SELECT count(*) FROM entries") == entries_before
    (source_pk,) = rows(db, "SELECT pk FROM sessions WHERE id = 'source'")[0]
    assert rows(db, "SELECT base_pk, base_seq FROM sessions WHERE id = 'fork'") == [
        (source_pk, 2000)
    ]
    await store.append_many(fork.id, [message("f1", "own"), message("f2", "own")])
    own = rows(
        db,
        "SELECT seq, entry_id FROM entries JOIN sessions ON pk = session_pk WHERE id = 'fork'",
    )
    assert own == [(2001, "f1"), (2002, "f2")]  # seq goes on after the fork point, gap-free
    assert len(await store.load("fork")) == 2002
    assert await store.integrity() == []


async def test_a_fork_inside_an_inherited_prefix_points_at_the_row_holder(
    store: SqlStore, db: Path
) -> None:
    root = await store.create(SessionMeta(id="root"))
    await store.append_many(root, [message(f"r{n}", "x") for n in range(10)])
    child = (await store.fork(root, meta=SessionMeta(id="child"))).id
    await store.append_many(child, [message(f"c{n}", "x") for n in range(10)])
    await store.fork(child, at="r4", meta=SessionMeta(id="inside"))
    await store.fork(child, at="c4", meta=SessionMeta(id="own-part"))
    await store.fork(child, at="r9", meta=SessionMeta(id="at-the-edge"))
    pks = dict(rows(db, "SELECT id, pk FROM sessions"))
    bases = dict(
        (row[0], row[1:]) for row in rows(db, "SELECT id, base_pk, base_seq FROM sessions")
    )
    assert bases["inside"] == (pks["root"], 5)
    assert bases["own-part"] == (pks["child"], 15)
    assert bases["at-the-edge"] == (pks["root"], 10)
    assert bases["child"] == (pks["root"], 10)


async def test_a_fork_of_an_empty_prefix_shares_nothing(store: SqlStore, db: Path) -> None:
    source = await store.create(SessionMeta(id="empty"))
    await store.fork(source, meta=SessionMeta(id="fork"))
    assert rows(db, "SELECT base_pk, base_seq, parent_session FROM sessions WHERE id = 'fork'") == [
        (None, None, "empty")
    ]


async def test_a_fork_pointed_elsewhere_breaks_its_chain(store: SqlStore, db: Path) -> None:
    source = await store.create(SessionMeta(id="source"))
    await store.append_many(source, [message(f"e{n}", "x") for n in range(5)])
    await store.fork(source, at="e2", meta=SessionMeta(id="fork"))
    await store.append("fork", message("f1", "x"))
    with sqlite_connection(db) as connection:
        connection.execute("DROP TRIGGER sessions_no_update")  # only a test may do this
        connection.execute("UPDATE sessions SET base_seq = 4 WHERE id = 'fork'")
    assert await store.integrity() == [
        "session 'fork': 1 entries but seq runs 4..4 (it shares 4)",
        "session 'fork': its header does not match its digest: "
        "its row changed after it was written",
    ]


async def test_a_changed_shared_row_is_named_in_its_holder(store: SqlStore, db: Path) -> None:
    source = await store.create(SessionMeta(id="source"))
    await store.append_many(source, [message(f"e{n}", "x") for n in range(5)])
    await store.fork(source, meta=SessionMeta(id="fork"))
    with sqlite_connection(db) as connection:
        connection.execute("DROP TRIGGER entries_no_update")
        connection.execute(
            "UPDATE entries SET line = replace(line, '\"x\"', '\"y\"') WHERE seq = 2"
        )
    assert await store.integrity() == [
        "session 'source': entry 2 ('e1') does not match its digest: "
        "its row changed after it was written"
    ]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE heads SET session_id = 'other'",
        "DELETE FROM heads",
        "INSERT OR REPLACE INTO heads VALUES ('chat', 1, 'other', 'now')",
        "REPLACE INTO heads VALUES ('chat', 1, 'other', 'now')",
    ],
)
async def test_heads_are_append_only(store: SqlStore, db: Path, statement: str) -> None:
    session = await store.create(SessionMeta(id="s"))
    await store.set_head("chat", session)
    with (
        sqlite_connection(db) as connection,
        pytest.raises(sqlite3.DatabaseError, match="heads is append-only"),
    ):
        connection.execute(statement)
    assert await store.head("chat") == "s"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_processes_forking_and_appending_to_one_source_corrupt_nothing(
    store_targets: StoreTargets, kind: str
) -> None:
    target = store_targets.new(kind)
    async with await open_store(target) as store:
        source = await store.create(SessionMeta(id="source"))
        await store.append(source, message("e0", "start"))
    workers, rounds = ["a", "b", "c", "d"], 15
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKERS / "forker.py"),
            target,
            source,
            worker,
            str(rounds),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for worker in workers
    ]
    results = await asyncio.gather(*(p.communicate() for p in processes))
    assert [p.returncode for p in processes] == [0] * len(workers), results
    async with await open_store(target) as store:
        whole = await store.load(source)
        assert len(whole) == 1 + len(workers) * rounds
        for worker in workers:
            for n in range(rounds):
                fork = await store.load(f"{worker}-{n}")
                assert fork[:-1] == whole[: len(fork) - 1]  # a prefix of the source...
                last = fork[-1]
                assert isinstance(last, MessageEntry)
                assert last.message.text() == f"{worker}:{n}:fork"  # ...then its own entry
            history = await store.head_history(worker)
            assert [move.session_id for move in history] == [f"{worker}-{n}" for n in range(rounds)]
        assert await store.integrity() == []


async def test_a_process_killed_while_forking_leaves_whole_forks_or_none(
    store: SqlStore, db: Path
) -> None:
    source = await store.create(SessionMeta(id="source"))
    await store.append_many(source, [message(f"e{n}", "x" * 200) for n in range(200)])
    async with ForkServer(WORKERS / "forker.py") as server:
        for round_ in range(8):
            worker = await server.run(f"sqlite:///{db}", source, f"k{round_}", "100000")
            for _ in range(3 + round_):  # let it fork a while, then kill it mid-stream
                await worker.readline()
            worker.kill()
            assert await worker.wait() == -signal.SIGKILL
    whole = await store.load(source)
    forks = [meta.id for meta in await store.list() if meta.id != source]
    assert len(forks) >= sum(3 + n for n in range(8))
    for fork in forks:
        got = await store.load(fork)
        shared = got[:-1] if got[-1].id not in {e.id for e in whole} else got
        assert shared == whole[: len(shared)]
        assert len(shared) >= 200
    assert await store.integrity() == []
