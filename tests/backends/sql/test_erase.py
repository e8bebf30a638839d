"""Erasing on the SQL store beyond the contract: the bytes really go on
SQLite, raw DELETEs still fail, caches of other store objects, processes."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from sessionstore import (
    SessionMeta,
    SessionNotFoundError,
    SqlStore,
    migrate,
    open_store,
)
from sessionstore.testing.contract import message
from tests.backends.sql.helpers import stored_bytes
from tests.helpers import APPENDER, ROOT
from tests.kinds import StoreTargets


async def sql(db: Path) -> SqlStore:
    store = await open_store(db)
    assert isinstance(store, SqlStore)
    return store


async def test_erased_text_is_nowhere_in_the_database_file_or_its_wal(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    text, entry_id, line = (f"MARK{n}-{uuid.uuid4().hex}" for n in "TIL")
    async with await sql(db) as store:
        await store.create(SessionMeta(id="kept"))
        await store.append("kept", message("k", "stays " * 500))
        doomed = await store.create(SessionMeta(id="doomed"))
        # Long lines spill onto overflow pages; many rows split the index.
        await store.append_many(doomed, [message(f"e{n}", "x" * 3000) for n in range(40)])
        await store.append(doomed, message(entry_id, text))
        await store.append_many(doomed, [message(f"f{n}", "y" * 3000) for n in range(40)])
        await store.journal("agent").append_raw(line.encode(), b"other")
        await store.load_context(doomed)
        for marker in (text, entry_id, line):  # else the test proves nothing
            assert marker.encode() in stored_bytes(db)
        await store.erase(doomed, reason="the user asked")
        await store.journal("agent").erase(reason="the user asked")
        for marker in (text, entry_id, line):
            assert marker.encode() not in stored_bytes(db), marker
        assert [e.id for e in await store.load("kept")] == ["k"]
        assert await store.integrity() == []


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM entries",
        "DELETE FROM sessions WHERE id = 's'",
        "DELETE FROM journal_lines",
        "DELETE FROM erasures",
        "UPDATE erasures SET reason = 'x'",
        "UPDATE entries SET line = line",
    ],
)
async def test_raw_writes_still_fail_even_after_an_erasure_of_that_id(
    tmp_path: Path, statement: str
) -> None:
    db = tmp_path / "s.db"
    async with await sql(db) as store:
        await store.create(SessionMeta(id="s"))
        await store.erase("s", reason="first")  # an old record for "s" lets nothing go
        await store.create(SessionMeta(id="s"))
        await store.append("s", message("e1", "x"))
        await store.journal("s").append_raw(b"line")
    connection = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(statement)
    connection.close()
    async with await sql(db) as store:
        assert len(await store.load("s")) == 1
        assert len(await store.erasures()) == 1
        assert await store.integrity() == []


async def test_erasing_names_only_the_newest_erasure(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with await sql(db) as store:
        for n in range(2):
            await store.create(SessionMeta(id=f"s{n}"))
            await store.erase(f"s{n}", reason="r")
    connection = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="newest erasure"):
        connection.execute("INSERT INTO erasing VALUES (1)")
    connection.close()


@pytest.mark.parametrize("kind", ["session", "journal"])
async def test_an_old_erasure_is_never_named_again(tmp_path: Path, kind: str) -> None:
    """The newest erasure names an id in use again: naming it in ``erasing``
    would let its new rows go with no record of it."""
    db = tmp_path / "s.db"
    async with await sql(db) as store:
        if kind == "session":
            await store.create(SessionMeta(id="s"))
            await store.erase("s", reason="first")
            await store.create(SessionMeta(id="s"))
            await store.append("s", message("e1", "x"))
        else:
            await store.journal("s").append_raw(b"line")
            await store.journal("s").erase(reason="first")
            await store.journal("s").append_raw(b"again")
    connection = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="only once"):
        connection.execute("INSERT INTO erasing SELECT max(seq) FROM erasures")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute("DELETE FROM erasures_spent")
    connection.close()
    async with await sql(db) as store:
        if kind == "session":
            assert len(await store.load("s")) == 1
        else:
            assert await store.journal("s").read_bytes() == b"again\n"
        assert await store.integrity() == []


FORGED = (
    "INSERT INTO erasures (kind, name, at, reason, lines, digest) "
    "VALUES ('session', 's', '2026-01-01T00:00:00Z', 'forged', 1, 'x')"
)


async def test_a_forged_erasure_deleting_part_of_a_session_is_refused_or_named(
    tmp_path: Path,
) -> None:
    """SQLite: the erasure cannot be closed while the session is there, and
    one left open is a fault; an erase after it still works."""
    db = tmp_path / "s.db"
    async with await sql(db) as store:
        await store.create(SessionMeta(id="s"))
        await store.append_many("s", [message("e1", "a"), message("e2", "b")])
        await store.create(SessionMeta(id="other"))
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("BEGIN")
    connection.execute(FORGED)
    connection.execute("INSERT INTO erasing SELECT max(seq) FROM erasures")
    connection.execute("DELETE FROM entries WHERE seq = 2")
    with pytest.raises(sqlite3.DatabaseError, match="removes all of its session"):
        connection.execute("DELETE FROM erasing")
    connection.execute("COMMIT")
    connection.close()
    async with await sql(db) as store:
        assert len(await store.load("s")) == 1  # gone in part, and
        faults = await store.integrity()
        assert faults == [
            "session 's': erasure 1 was left open (its rows may have been deleted in part, "
            "by hand: an erase closes it in its own transaction)"
        ]
        await store.erase("other", reason="still erases")
        assert await store.integrity() == faults


async def test_a_forged_erasure_deleting_part_of_a_session_is_refused_on_postgresql(
    pg_url: str,
) -> None:
    async with await SqlStore.open(pg_url) as store:
        await store.create(SessionMeta(id="s"))
        await store.append_many("s", [message("e1", "a"), message("e2", "b")])
        with psycopg.connect(pg_url.replace("postgresql+psycopg", "postgresql")) as connection:
            connection.execute(FORGED)
            connection.execute("DELETE FROM entries WHERE seq = 2")
            with pytest.raises(psycopg.errors.RaiseException, match="is still there"):
                connection.commit()
            # Checked at once, too, when asked to be.
            connection.execute("SET CONSTRAINTS ALL IMMEDIATE")
            with pytest.raises(psycopg.errors.RaiseException, match="is still there"):
                connection.execute(FORGED)
        assert len(await store.load("s")) == 2
        assert await store.erasures() == []
        assert await store.integrity() == []


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_erasures_recorded_before_the_upgrade_are_spent(
    store_targets: StoreTargets, kind: str
) -> None:
    """A database as 0006 left it (erasures recorded, none spent), upgraded
    in place: no old erasure lets a row go, and erasing works as before."""
    target = store_targets.new(kind)
    async with await open_store(target) as store:
        await store.create(SessionMeta(id="s"))
        await store.erase("s", reason="before the upgrade")
        await store.create(SessionMeta(id="s"))
        await store.append_many("s", [message("e1", "a"), message("e2", "b")])
        await store.create(SessionMeta(id="later"))
    downgraded = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "alembic", "-x", f"url={target}", "downgrade", "0006"),
        cwd=ROOT,  # alembic.ini's
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await downgraded.communicate()
    assert downgraded.returncode == 0, stderr
    await migrate.upgrade(target)
    if kind == "sqlite":
        connection = sqlite3.connect(target.removeprefix("sqlite:///"), isolation_level=None)
        with pytest.raises(sqlite3.DatabaseError, match="only once"):
            connection.execute("INSERT INTO erasing SELECT max(seq) FROM erasures")
        connection.close()
    else:
        with psycopg.connect(target.replace("postgresql+psycopg", "postgresql")) as postgres:
            postgres.execute(FORGED)
            postgres.execute("DELETE FROM entries WHERE seq = 2")
            with pytest.raises(psycopg.errors.RaiseException, match="is still there"):
                postgres.commit()
    async with await open_store(target) as store:
        assert len(await store.load("s")) == 2
        await store.erase("later", reason="after the upgrade")
        assert [e.reason for e in await store.erasures()] == [
            "before the upgrade",
            "after the upgrade",
        ]
        assert await store.integrity() == []


async def test_a_context_cached_by_another_store_object_is_not_served_stale(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    async with await sql(db) as eraser, await sql(db) as reader:
        await eraser.create(SessionMeta(id="other"))
        await eraser.create(SessionMeta(id="s"))
        await eraser.append("s", message("old", "old text"))
        assert [m.text() for m in await reader.load_context("s")] == ["old text"]
        assert "s" in [meta.id for meta in await reader.list()]
        # Erased: the reader's cached context and listing must not answer.
        await eraser.erase("s", reason="r")
        with pytest.raises(SessionNotFoundError):
            await reader.load_context("s")
        assert [meta.id for meta in await reader.list()] == ["other"]
        # Created again under the id, with as many entries (and, on SQLite,
        # the same key): the reader sees the new session.
        assert [m.text() for m in await reader.load_context("other")] == []
        await eraser.create(SessionMeta(id="s"))
        await eraser.append("s", message("new", "new text"))
        assert [m.text() for m in await reader.load_context("s")] == ["new text"]
        await eraser.erase("s", reason="again")
        await eraser.create(SessionMeta(id="s"))
        await eraser.append("s", message("newer", "newer text"))
        assert [m.text() for m in await reader.load_context("s")] == ["newer text"]


# -------------------------------------------- processes appending while erased


async def race_an_appender(target: str) -> None:
    """A process appends in a loop while this one erases: every append that
    returned is erased with the session, the next fails as not found."""
    async with await open_store(target) as store:
        session_id = await store.create(SessionMeta.new())
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, str(APPENDER), target, session_id, "w", "100000", "500"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        returned = [await process.stdout.readline() for _ in range(20)]  # appending now
        record = await store.erase(session_id, reason="while appending")
        rest, stderr = await process.communicate()
        returned += rest.splitlines(keepends=True)
        assert process.returncode != 0
        assert b"SessionNotFoundError" in stderr
        assert record.lines == len(returned)  # whole: every append that returned
        with pytest.raises(SessionNotFoundError):
            await store.load(session_id)
        assert await store.integrity() == []


async def test_an_append_racing_an_erase_in_another_process_sqlite(tmp_path: Path) -> None:
    await race_an_appender(f"sqlite:///{tmp_path / 's.db'}")


async def test_an_append_racing_an_erase_in_another_process_postgresql(pg_url: str) -> None:
    await race_an_appender(pg_url)
