"""Anchors kept outside a store show what a writer behind its back removed
or rewrote, on every backend (`sessionstore.anchors`, ``verify_store``)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from sessionstore import (
    Anchor,
    InvalidRecordError,
    SessionMeta,
    SessionStore,
    StorageError,
    encode,
)
from sessionstore import open_store as open_target
from sessionstore.anchors import read_anchors, write_anchors
from sessionstore.backends.sql.digests import ENTRY_COLUMNS, entry_digest
from sessionstore.testing.contract import message
from sessionstore.verify import VerifyReport, verify_store
from tests.kinds import PERSISTENT_KINDS, STORE_KINDS, StoreTargets


@pytest.fixture(params=STORE_KINDS)
def target(request: pytest.FixtureRequest, store_targets: StoreTargets) -> str:
    return store_targets.new(request.param)


@pytest.fixture
async def store(target: str) -> AsyncIterator[SessionStore]:
    async with await open_target(target) as store:
        yield store


async def two_sessions(store: SessionStore) -> None:
    await store.create(SessionMeta(id="a"))
    await store.append_many("a", [message("a1", "one"), message("a2", "two")])
    await store.create(SessionMeta(id="b"))
    await store.append("b", message("b1", "three"))


async def file_digest(store: SessionStore, session_id: str) -> str:
    digest = hashlib.blake2b(digest_size=32)
    async for block in store.raw_blocks(session_id):
        digest.update(block)
    return digest.hexdigest()


async def checked(store: SessionStore, anchors: list[Anchor]) -> VerifyReport:
    return await verify_store(store, anchors=anchors)


# ------------------------------------------------------------ what holds


async def test_anchors_hold_while_sessions_grow(store: SessionStore) -> None:
    await two_sessions(store)
    first = await checked(store, [])
    assert first.ok
    assert first.notes == []
    assert {(a.session, a.lines) for a in first.anchors} == {("a", 2), ("b", 1)}
    for anchor in first.anchors:  # an erasure's digest of the session
        assert anchor.digest == await file_digest(store, anchor.session)
        assert anchor.erasures == 0
    await store.append("a", message("a3", "more"))
    await store.create(SessionMeta(id="c"))
    later = await checked(store, first.anchors)
    assert later.ok, later.faults
    assert {(a.session, a.lines) for a in later.anchors} == {("a", 3), ("b", 1), ("c", 0)}
    assert (await verify_store(store)).anchors == []  # none asked for, none made


async def test_a_fork_is_anchored_with_the_history_it_shares(store: SessionStore) -> None:
    await two_sessions(store)
    fork = await store.fork("a", at="a1")
    await store.append(fork.id, message("f1", "on the fork"))
    report = await checked(store, [])
    anchors = {a.session: a for a in report.anchors}
    assert anchors[fork.id].lines == 2
    assert anchors[fork.id].digest == await file_digest(store, fork.id)
    assert (await checked(store, report.anchors)).ok


async def test_a_session_erased_since_it_was_anchored_is_a_note(store: SessionStore) -> None:
    await two_sessions(store)
    anchors = (await checked(store, [])).anchors
    await store.erase("a", reason="the user asked")
    report = await checked(store, anchors)
    assert report.ok
    assert report.notes == [
        f"session 'a': erased since it was anchored ({(await store.erasures())[0].at}, "
        "'the user asked')"
    ]
    await store.create(SessionMeta(id="a"))  # and made again, shorter
    report = await checked(store, anchors)
    assert report.ok
    assert report.notes[0].endswith(", and created again")
    assert {a.erasures for a in report.anchors} == {1}


async def test_an_anchors_erasures_before_it_do_not_excuse_a_loss(store: SessionStore) -> None:
    """An erasure made before the anchor says nothing of a session lost after it."""
    await store.create(SessionMeta(id="a"))
    await store.erase("a", reason="old")
    await store.create(SessionMeta(id="a"))
    await store.append("a", message("a1", "one"))
    anchors = (await checked(store, [])).anchors
    assert [a.erasures for a in anchors] == [1]
    shorter = anchors[0].model_copy(update={"lines": 2, "digest": "0" * 64})
    report = await checked(store, [shorter])
    assert report.faults == [
        "session 'a': anchored with 2 entries, now holds 1, with no erasure recorded "
        "since: entries were deleted"
    ]


# ------------------------------------------------------------ behind the store's back


def raw_sqlite(target: str) -> sqlite3.Connection:
    database = make_url(target).database
    assert database is not None
    return sqlite3.connect(database, isolation_level=None)


def raw_postgresql(target: str) -> psycopg.Connection[tuple[object, ...]]:
    conninfo = make_url(target).set(drivername="postgresql")
    connection = psycopg.connect(conninfo.render_as_string(hide_password=False), autocommit=True)
    connection.execute("SET session_replication_role = replica")  # no trigger fires
    return connection


def delete_rows(kind: str, target: str, statements: list[str]) -> None:
    """Run DELETEs with the append-only triggers out of the way."""
    if kind == "sqlite":
        with closing(raw_sqlite(target)) as connection:
            names = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%no_delete'"
            ).fetchall()
            for (name,) in names:
                connection.execute(f"DROP TRIGGER {name}")
            for statement in statements:
                connection.execute(statement)
        return
    with raw_postgresql(target) as postgres:
        for statement in statements:
            postgres.execute(statement)


OF_A = "(SELECT pk FROM sessions WHERE id = 'a')"


@pytest.mark.parametrize("kind", PERSISTENT_KINDS)
async def test_entries_cut_from_a_sessions_end_are_a_fault(
    store_targets: StoreTargets, kind: str
) -> None:
    target = store_targets.new(kind)
    async with await open_target(target) as store:
        await two_sessions(store)
        anchors = (await checked(store, [])).anchors
    if kind == "jsonl":
        path = Path(target) / "a.jsonl"
        path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:2]))
    else:
        # Its words too: a careful writer leaves the word index sound (on
        # SQLite the entry is in the backlog, not yet in the index).
        tables = ["search_vectors", "entries"] if kind == "postgresql" else ["entries"]
        delete_rows(
            kind,
            target,
            [f"DELETE FROM {table} WHERE session_pk = {OF_A} AND seq = 2" for table in tables],
        )
    async with await open_target(target) as store:
        assert len(await store.load("a")) == 1  # gone, and unseen by the store itself:
        if kind != "jsonl":
            assert await store.integrity() == []
        report = await checked(store, anchors)
    assert report.faults == [
        "session 'a': anchored with 2 entries, now holds 1, with no erasure recorded "
        "since: entries were deleted"
    ]


@pytest.mark.parametrize("kind", PERSISTENT_KINDS)
async def test_a_session_deleted_is_a_fault(store_targets: StoreTargets, kind: str) -> None:
    target = store_targets.new(kind)
    async with await open_target(target) as store:
        await two_sessions(store)
        anchors = (await checked(store, [])).anchors
    if kind == "jsonl":
        (Path(target) / "a.jsonl").unlink()
    else:
        delete_rows(
            kind,
            target,
            [
                *(
                    f"DELETE FROM {table} WHERE session_pk = {OF_A}"
                    for table in ("titles", "listing", "activity", "entries")
                ),
                "DELETE FROM sessions WHERE id = 'a'",
            ],
        )
    async with await open_target(target) as store:
        report = await checked(store, anchors)
    assert "session 'a': anchored with 2 entries, now gone, with no erasure recorded since" in (
        report.faults
    )


async def test_history_rewritten_with_its_digests_is_a_fault(store_targets: StoreTargets) -> None:
    """The chain of digests holds no secret: rewritten with the rows, it
    passes ``integrity()``; the anchor kept elsewhere does not."""
    target = store_targets.new("sqlite")
    async with await open_target(target) as store:
        await two_sessions(store)
        anchors = (await checked(store, [])).anchors
    forged = message("a2", "rewritten")
    with closing(raw_sqlite(target)) as connection:
        connection.execute("DROP TRIGGER entries_no_update")
        (previous,) = connection.execute(
            f"SELECT digest FROM entries WHERE session_pk = {OF_A} AND seq = 1"
        ).fetchone()
        columns: dict[str, str | None] = dict.fromkeys(ENTRY_COLUMNS)
        columns.update(
            entry_id="a2", type="message", timestamp=forged.timestamp, line=encode(forged)
        )
        connection.execute(
            "UPDATE entries SET line = ?, timestamp = ?, digest = ? "
            f"WHERE session_pk = {OF_A} AND seq = 2",
            (columns["line"], columns["timestamp"], entry_digest(bytes(previous), columns)),
        )
    async with await open_target(target) as store:
        assert (await store.load("a"))[1] == forged
        assert await store.integrity() == []  # the chain was rewritten too
        report = await checked(store, anchors)
    assert report.faults == [
        f"session 'a': its first 2 entries are not those anchored at {anchors[0].at}: "
        "its history was rewritten"
    ]


async def test_erasure_records_deleted_are_a_fault(store_targets: StoreTargets) -> None:
    target = store_targets.new("sqlite")
    async with await open_target(target) as store:
        await two_sessions(store)
        await store.erase("b", reason="r")
        anchors = (await checked(store, [])).anchors
    with closing(raw_sqlite(target)) as connection:
        for table in ("erasures", "erasures_spent"):
            connection.execute(f"DROP TRIGGER {table}_no_delete")
        connection.execute("DELETE FROM erasures_spent")
        connection.execute("DELETE FROM erasures")
    async with await open_target(target) as store:
        report = await checked(store, anchors)
    assert report.faults == [
        "the store holds 0 erasure records, fewer than the 1 it held when anchored: "
        "erasure records were deleted"
    ]


# ------------------------------------------------------------ the file


def test_an_anchors_file_round_trips_and_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "anchors.jsonl"
    assert read_anchors(path) == []
    anchors = [
        Anchor(session="a\u00e9\n", lines=2, digest="ab" * 32, erasures=3, at="2026-12-02T00:00Z"),
        Anchor(session="b", lines=0, digest="cd" * 32, erasures=0, at="2026-12-02T00:00Z"),
    ]
    write_anchors(path, anchors)
    assert read_anchors(path) == anchors
    assert os.stat(path).st_mode & 0o777 == 0o600
    write_anchors(path, anchors[1:])  # replaced whole
    assert read_anchors(path) == anchors[1:]
    assert [p.name for p in tmp_path.iterdir()] == ["anchors.jsonl"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"session":"a","lines":1}\n', "line 1: "),
        (
            '{"session":"a","lines":1,"digest":"x","erasures":0,"at":"t"}\n'
            '{"session":"a","lines":2,"digest":"y","erasures":0,"at":"t"}\n',
            "line 2: session 'a' is anchored twice",
        ),
        ("not json\n", "line 1: "),
    ],
)
def test_a_bad_anchors_file_is_refused_naming_its_line(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "anchors.jsonl"
    path.write_text(text)
    with pytest.raises(InvalidRecordError, match=f"anchors.jsonl, {says}"):
        read_anchors(path)


def test_an_anchors_file_is_read_only_as_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "anchors.jsonl").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StorageError, match="cannot read anchors"):
        read_anchors(tmp_path / "anchors.jsonl")
    with pytest.raises(StorageError, match="cannot write anchors"):
        write_anchors(tmp_path / "missing" / "anchors.jsonl", [])
