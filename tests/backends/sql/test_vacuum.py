"""`vacuum` on SQL stores: the file shrinks after erasures, what was kept stays
whole, and what was erased is in no file afterwards (docs/sql.md, Vacuum)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionMeta, SessionStore, StorageError, migrate, open_store, vacuum
from sessionstore.testing.common import message, raw
from tests.backends.sql.helpers import stored_bytes
from tests.kinds import TEST_KEYS

PLAIN_AND_SEALED = [pytest.param({}, id="plain"), pytest.param({"keys": TEST_KEYS}, id="sealed")]


def pragma(db: Path, name: str) -> Any:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


def file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())


async def fill(store: SessionStore, ids: list[str], entries: int = 30, text: str = "") -> None:
    """Sessions of ``entries`` entries of 2 kB each (``text`` in the first one's)."""
    for session_id in ids:
        await store.create(SessionMeta(id=session_id))
        lines = [message(f"{session_id}-{n}", f"{n:04d}" * 500) for n in range(entries)]
        if text:
            lines[0] = message(f"{session_id}-0", f"the words {text} were said")
        await store.append_many(session_id, lines)


async def contents(store: SessionStore) -> dict[str, list[str]]:
    return {meta.id: await raw(store, meta.id) for meta in await store.list()}


async def mostly_erased(db: Path) -> dict[str, list[str]]:
    """A store at ``db`` of ten sessions, nine of them erased: what it keeps."""
    async with open_store(db) as store:
        await fill(store, [f"s{n}" for n in range(10)])
        for n in range(1, 10):
            await store.erase(f"s{n}", reason="retention")
        return await contents(store)


def make_old(db: Path) -> None:
    """Turn a store's file into one made before incremental auto_vacuum."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA auto_vacuum=NONE")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert pragma(db, "auto_vacuum") == 0


async def test_a_new_store_file_keeps_incremental_auto_vacuum(tmp_path: Path) -> None:
    async with open_store(tmp_path / "s.db") as store:
        await store.create(SessionMeta(id="s"))
    assert pragma(tmp_path / "s.db", "auto_vacuum") == 2  # INCREMENTAL


async def test_a_file_migrated_from_empty_keeps_incremental_auto_vacuum(tmp_path: Path) -> None:
    await migrate.upgrade(str(tmp_path / "m.db"))
    assert pragma(tmp_path / "m.db", "auto_vacuum") == 2


async def test_vacuum_after_erasures_shrinks_the_file_and_keeps_the_rest_whole(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    async with open_store(db) as store:
        await fill(store, [f"s{n}" for n in range(20)])
        for n in range(20):
            if n % 5:
                await store.erase(f"s{n}", reason="retention")
        kept = await contents(store)
    before = file_bytes(db)

    report = await vacuum(db)

    assert report.kind == "sqlite"
    assert report.complete
    assert not report.converted
    assert report.bytes_before == before
    assert report.bytes_after == file_bytes(db) < before / 2
    assert report.pages_freed > 0
    assert report.chunks > 0
    assert pragma(db, "freelist_count") == 0
    assert not db.with_name("s.db-wal").exists() or file_bytes(db) == db.stat().st_size
    async with open_store(db) as store:
        assert await contents(store) == kept
        assert await store.integrity() == []


async def test_full_vacuum_gives_the_space_back_in_one_run_with_progress(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    kept = await mostly_erased(db)
    before = file_bytes(db)
    seen: list[tuple[int, int]] = []

    report = await vacuum(db, full=True, progress=lambda done, total: seen.append((done, total)))

    assert report.full
    assert not report.converted
    assert report.chunks == 0  # no incremental step: the VACUUM gave it all back
    assert seen == []
    assert report.bytes_after == file_bytes(db) < before / 2
    assert pragma(db, "auto_vacuum") == 2  # still incremental afterwards
    async with open_store(db) as store:
        assert await contents(store) == kept


async def test_steps_report_progress_up_to_every_free_page(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    await mostly_erased(db)
    seen: list[tuple[int, int]] = []

    report = await vacuum(db, progress=lambda done, total: seen.append((done, total)))

    assert len(seen) == report.chunks > 0
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert seen[-1] == (report.pages_freed, report.pages_freed)


async def test_vacuum_with_nothing_erased_gives_nothing_back(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with open_store(db) as store:
        await fill(store, ["a", "b"])
    report = await vacuum(db)
    assert report.pages_freed == 0
    assert report.given_back == 0
    assert report.complete


@pytest.mark.parametrize("sealing", PLAIN_AND_SEALED)
async def test_erased_bytes_are_in_neither_file_after_a_vacuum(
    tmp_path: Path, sealing: dict[str, Any]
) -> None:
    db = tmp_path / "s.db"
    marker = f"marker{uuid.uuid4().hex}"
    async with open_store(db, **sealing) as store:
        await fill(store, ["first"])
        await fill(store, ["doomed"], text=marker)
        await fill(store, ["last"], entries=60)  # after it: its pages move into the gap
        with closing(sqlite3.connect(db)) as conn:
            # What the files hold of the doomed text: itself, or its ciphertext.
            # The second session made: its first entry.
            (line,) = conn.execute(
                "SELECT line FROM entries WHERE session_pk ="
                " (SELECT pk FROM sessions ORDER BY pk LIMIT 1 OFFSET 1) ORDER BY seq LIMIT 1"
            ).fetchone()
        stored = line if isinstance(line, bytes) else line.encode()
        trace = marker.encode() if not sealing else stored[len(stored) // 2 :][:32]
        assert trace in stored_bytes(db)  # else the test proves nothing
        await store.erase("doomed", reason="the user asked")
        kept = await contents(store)

    report = await vacuum(db)

    assert report.given_back > 0
    assert trace not in stored_bytes(db)
    async with open_store(db, **sealing) as store:
        assert await contents(store) == kept
        assert await store.integrity() == []


async def test_an_older_file_is_converted_once_by_a_full_vacuum(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with open_store(db) as store:
        await fill(store, [f"s{n}" for n in range(10)])
    make_old(db)
    async with open_store(db) as store:
        for n in range(1, 10):
            await store.erase(f"s{n}", reason="retention")
        kept = await contents(store)
    before = file_bytes(db)

    first = await vacuum(db)
    again = await vacuum(db)

    assert first.converted
    assert first.complete
    assert first.bytes_after < before / 2
    assert pragma(db, "auto_vacuum") == 2
    assert not again.converted
    assert again.given_back == 0
    async with open_store(db) as store:
        assert await contents(store) == kept


async def test_convert_false_leaves_an_older_file_as_it_was_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with open_store(db) as store:
        await fill(store, ["a", "b"])
    make_old(db)
    async with open_store(db) as store:
        await store.erase("b", reason="retention")

    report = await vacuum(db, convert=False)

    assert not report.complete
    assert not report.converted
    assert "full VACUUM" in report.notes[0]
    assert pragma(db, "auto_vacuum") == 0
    assert pragma(db, "freelist_count") > 0


async def test_appends_made_while_a_vacuum_runs_are_all_kept(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with open_store(db) as store:
        await fill(store, [f"s{n}" for n in range(20)])
        for n in range(1, 20):
            await store.erase(f"s{n}", reason="retention")
        await store.create(SessionMeta(id="live"))
        running = asyncio.create_task(vacuum(db, chunk=0.001))
        written: list[str] = []
        while not running.done():
            entry = message(f"live-{len(written)}", "an append meanwhile")
            await store.append("live", entry)
            written.append(entry.id)
        report = await running
        assert report.pages_freed > 0
        assert [entry.id for entry in await store.load("live")] == written
        assert await store.integrity() == []


async def test_a_missing_database_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such database"):
        await vacuum(tmp_path / "none.db")
    assert list(tmp_path.iterdir()) == []


async def test_postgresql_runs_the_documented_rewrite_and_keeps_the_rest(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        await fill(store, ["kept", "doomed"])
        await store.erase("doomed", reason="retention")
        kept = await contents(store)

    report = await vacuum(pg_url)

    assert report.kind == "postgresql"
    assert 0 < report.bytes_after < report.bytes_before
    assert report.complete or "superuser" in report.notes[0]
    async with open_store(pg_url) as store:
        assert await contents(store) == kept
        assert await store.integrity() == []


async def test_postgresql_tables_a_role_may_not_vacuum_are_reported_left(pg_url: str) -> None:
    # PostgreSQL skips a table its role does not own with a WARNING, not an
    # error: a vacuum by such a role must not say the erased bytes are gone.
    import psycopg
    from sqlalchemy.engine import make_url

    async with open_store(pg_url) as store:
        await fill(store, ["kept", "doomed"], entries=3)
        await store.erase("doomed", reason="retention")
        kept = await contents(store)
    url = make_url(pg_url)
    schema = str(url.query["options"]).removeprefix("-csearch_path=")
    role = f"not_owner_{uuid.uuid4().hex[:12]}"
    conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as admin:
        may = admin.execute(
            "SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if may is None or not may[0]:
            pytest.skip("the PostgreSQL role may not make a role to vacuum as")
        admin.execute(f"CREATE ROLE {role} LOGIN")
        try:
            admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            admin.execute(
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"
            )
            as_role = url.set(username=role, password=None).render_as_string(hide_password=False)

            report = await vacuum(as_role)

            assert not report.complete
            assert {"sessions", "entries"} <= set(report.skipped)
            assert f"role {role} may not vacuum them" in report.notes[0]
            assert "rewritten" not in " ".join(report.notes[1:])
        finally:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")
    async with open_store(pg_url) as store:
        assert await contents(store) == kept
