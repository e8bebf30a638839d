"""Migrations: alembic from the command line and from code, schema checks on open."""

import asyncio
import sqlite3
import subprocess
import sys
import venv
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy
from alembic.script import ScriptDirectory

from sessionstore import (
    CompactionEntry,
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
    SessionEntry,
    SessionMeta,
    decode_entry,
    encode,
    migrate,
    open_store,
)
from sessionstore.backends.sql import schema
from sessionstore.backends.sql.digests import entry_digest, header_digest
from sessionstore.testing.contract import message
from tests.helpers import alembic

ROOT = Path(__file__).resolve().parent.parent
TABLES = {"sessions", "entries", "journal_lines"}


def tables(db: Path) -> set[str]:
    rows = sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {name for (name,) in rows}


def version(db: Path) -> list[tuple[str]]:
    query = f"SELECT version_num FROM {migrate.VERSION_TABLE}"
    return sqlite3.connect(db).execute(query).fetchall()


def test_migrations_have_a_single_head_which_the_schema_check_knows() -> None:
    heads = ScriptDirectory.from_config(migrate.alembic_config()).get_heads()
    assert heads == [migrate.head()] == [schema.REVISION]


def test_alembic_upgrade_downgrade_round_trip_on_an_empty_database(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    url = f"url=sqlite:///{db}"
    assert alembic("-x", url, "upgrade", "head").returncode == 0
    assert tables(db) >= TABLES
    assert version(db) == [(migrate.head(),)]
    downgraded = alembic("-x", url, "downgrade", "base")
    assert downgraded.returncode == 0, downgraded.stderr
    assert tables(db) & TABLES == set()
    assert alembic("-x", url, "upgrade", "head").returncode == 0
    assert tables(db) >= TABLES


def test_alembic_without_a_url_says_how_to_give_one() -> None:
    result = alembic("upgrade", "head", env={"SESSIONSTORE_URL": ""})
    assert result.returncode != 0
    assert "-x url=" in result.stderr


async def test_upgrade_from_code_and_current(tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'code.db'}"
    assert await migrate.current(target) is None
    await migrate.upgrade(target)
    assert await migrate.current(target) == migrate.head()
    await migrate.upgrade(target)  # already there: nothing to do
    assert tables(tmp_path / "code.db") >= TABLES


async def test_opening_an_empty_database_migrates_it(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    async with open_store(db) as store:
        await store.create(SessionMeta.new())
    assert version(db) == [(migrate.head(),)]


def schema_and_rows(db: Path) -> tuple[list[tuple[str, ...]], dict[str, list[tuple[object, ...]]]]:
    """Every object of a SQLite database (kind, name, table, SQL) and every row."""
    with closing(sqlite3.connect(db)) as connection:
        objects = sorted(
            connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        )
        names = [name for kind, name, _, _ in objects if kind == "table"]
        rows = {name: sorted(connection.execute(f'SELECT * FROM "{name}"')) for name in names}
    return objects, rows


async def test_a_new_sqlite_store_is_the_database_the_migrations_make(tmp_path: Path) -> None:
    migrated, opened = tmp_path / "migrated.db", tmp_path / "opened.db"
    await migrate.upgrade(str(migrated))  # alembic, revision by revision
    async with open_store(opened):  # the migrations' result, replayed
        pass
    objects, rows = schema_and_rows(opened)
    assert (objects, rows) == schema_and_rows(migrated)
    assert any(kind == "trigger" for kind, *_ in objects)
    assert rows["sessionstore_alembic_version"] == [(migrate.head(),)]


async def test_an_older_schema_is_refused_naming_the_upgrade_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "old.db"
    await migrate.upgrade(str(db))
    # Pretend this code is one revision ahead of the database.
    monkeypatch.setattr(schema, "REVISION", "0002_future")
    with pytest.raises(SchemaOutdatedError, match="sessionstore migrate --db") as caught:
        await open_store(db)
    assert "alembic -x url=" in str(caught.value)


async def test_a_newer_schema_is_refused_and_nothing_written(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    await migrate.upgrade(str(db))
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999_from_future'")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = db.read_bytes()
    with pytest.raises(SchemaTooNewError, match="9999_from_future"):
        await open_store(db)
    assert db.read_bytes() == before
    assert version(db) == [("9999_from_future",)]


async def test_our_tables_without_a_revision_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "foreign.db"
    sqlite3.connect(db).execute("CREATE TABLE sessions (x)")
    with pytest.raises(SchemaError, match="not created by sessionstore"):
        await open_store(db)


async def test_other_applications_tables_are_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE alembic_version (version_num TEXT)")
    connection.execute("INSERT INTO alembic_version VALUES ('host_app_rev')")
    connection.commit()
    async with open_store(db) as store:
        await store.create(SessionMeta.new())
    assert sqlite3.connect(db).execute("SELECT * FROM alembic_version").fetchall() == [
        ("host_app_rev",)
    ]


def test_an_installed_wheel_migrates_a_new_database(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("sessionstore-*.whl")
    env_dir = tmp_path / "venv"
    # No pip of its own and no downloads: this checkout's pip installs the
    # wheel alone, and a .pth file lends it the dependencies installed here
    # (a directory a .pth file names is searched after the venv's own
    # packages, and its .pth files, this checkout's editable install
    # among them, are not run).
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lent = Path(sqlalchemy.__file__).parent.parent
    (Path(site) / "lent.pth").write_text(f"{lent}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    install = subprocess.run(
        [*pip, "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    script = (
        "import asyncio, sessionstore, sessionstore.migrate as m\n"
        "print(sessionstore.__file__)\n"
        "asyncio.run(m.upgrade('sqlite:///fresh.db'))\n"
        "print(asyncio.run(m.current('sqlite:///fresh.db')))\n"
    )
    run = subprocess.run(
        [str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    location, revision = run.stdout.split()
    assert location.startswith(str(env_dir))  # the wheel, not this checkout
    assert revision == migrate.head()
    assert tables(tmp_path / "fresh.db") >= TABLES


# -------------------------------------------------- a populated database upgraded


def populate(
    db: Path, revision: str, more: dict[str, list[SessionEntry]] | None = None
) -> dict[str, list[str]]:
    """Sessions, entries and a journal written at ``revision`` (0001 to 0004),
    row by row as that revision's store wrote them, and ``more`` sessions
    after them; the lines of each session."""
    compaction = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="e2")
    sessions: dict[str, list[SessionEntry]] = {
        "plain": [message("e1", "hello"), message("e2", "héllo\r")],
        "compacted": [message("e1", "a"), message("e2", "b"), compaction],
        "empty": [],
        **(more or {}),
    }
    written: dict[str, list[str]] = {}
    connection = sqlite3.connect(db, isolation_level=None)
    for pk, (session_id, entries) in enumerate(sessions.items(), 1):
        header = encode(SessionMeta(id=session_id, created_at="2026-01-01T00:00:00Z"))
        digest = header_digest(header) if revision != "0001" else None
        connection.execute(
            "INSERT INTO sessions (pk, id, version, parent_session, created_at, header) "
            "VALUES (?, ?, 1, NULL, '2026-01-01T00:00:00Z', ?)",
            (pk, session_id, header),
        )
        if digest is not None:  # an insert with the column would fail at 0001
            connection.execute("DROP TRIGGER sessions_no_update")
            connection.execute("UPDATE sessions SET digest = ? WHERE pk = ?", (digest, pk))
            connection.execute(
                "CREATE TRIGGER sessions_no_update BEFORE UPDATE ON sessions "
                "BEGIN SELECT RAISE(ABORT, 'sessionstore: sessions is append-only'); END"
            )
        lines = [encode(entry) for entry in entries]
        for seq, (entry, line) in enumerate(zip(entries, lines, strict=True), 1):
            kept = entry.first_kept_id if isinstance(entry, CompactionEntry) else None
            row = {
                "entry_id": entry.id,
                "type": entry.type,
                "timestamp": entry.timestamp,
                "first_kept_id": kept,
                "line": line,
            }
            columns = "session_pk, seq, entry_id, type, timestamp, first_kept_id, line"
            values: tuple[object, ...] = (pk, seq, *row.values())
            if digest is not None:
                digest = entry_digest(digest, row)
                columns, values = columns + ", digest", (*values, digest)
            marks = ", ".join("?" * len(values))
            connection.execute(f"INSERT INTO entries ({columns}) VALUES ({marks})", values)
        written[session_id] = [header, *lines]
    for seq, journal_line in enumerate([b"one", None, b"two"], 1):  # None: a clear
        connection.execute("INSERT INTO journal_lines VALUES ('agent', ?, ?)", (seq, journal_line))
    connection.close()
    return written


async def assert_kept_and_chained(target: str, written: dict[str, list[str]]) -> None:
    """Every byte kept, every chain of digests whole, appends continue it,
    and the sessions stored before branch like any other."""
    async with open_store(target) as store:
        for session_id, lines in written.items():
            assert [line async for line in store.raw_lines(session_id)] == lines
        assert {s.id for s in await store.summaries(limit=None)} == set(written)
        assert await store.journal("agent").read_bytes() == b"two\n"
        assert await store.integrity() == []
        await store.append("plain", message("e3", "after the upgrade"))
        fork = await store.fork("compacted", at="e2")
        await store.append(fork.id, message("f1", "on the fork"))
        assert [line async for line in store.raw_lines(fork.id)] == [
            encode(fork),
            *written["compacted"][1:3],
            encode(message("f1", "on the fork")),
        ]
        await store.set_head("conversation", fork.id)
        assert await store.head("conversation") == fork.id
        assert await store.integrity() == []
        # Sessions and journals stored before the upgrade are erased whole.
        erased = await store.erase("plain", reason="after the upgrade")
        assert erased.lines == 3
        assert (await store.journal("agent").erase(reason="r")) is not None
        assert await store.erasures() == [erased, *(await store.erasures())[1:]]
        assert await store.journals() == []
        await store.journal("agent").append_raw(b"again")  # a journal starts anew
        assert await store.integrity() == []


@pytest.mark.parametrize("how", ["code", "alembic", "cli"])
@pytest.mark.parametrize("revision", ["0001", "0002", "0003", "0004"])
async def test_a_populated_database_is_upgraded_in_place(
    tmp_path: Path, how: str, revision: str
) -> None:
    db = tmp_path / "old.db"
    await migrate.upgrade(str(db), revision)
    written = populate(db, revision)
    if how == "code":
        await migrate.upgrade(str(db))
    elif how == "alembic":
        upgraded = alembic("-x", f"url=sqlite:///{db}", "upgrade", "head")
        assert upgraded.returncode == 0, upgraded.stderr
    else:
        command = [sys.executable, "-m", "sessionstore", "migrate", "--db", str(db)]
        migrated = await asyncio.create_subprocess_exec(*command, stderr=asyncio.subprocess.PIPE)
        _, stderr = await migrated.communicate()
        assert migrated.returncode == 0, stderr
    assert version(db) == [(schema.REVISION,)]
    await assert_kept_and_chained(str(db), written)
    connection = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute("REPLACE INTO journal_lines VALUES ('agent', 1, x'00')")
    for statement in ("DELETE FROM entries", "DELETE FROM sessions"):  # only erase deletes
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            connection.execute(statement)


# -------------------------------------------------- the word index packed (0009)


def word_rows(db: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as connection:
        return connection.execute("SELECT * FROM search_words ORDER BY 1, 2, 3").fetchall()


LONG: list[SessionEntry] = [
    message(f"m{n}", f"plum w{n % 7} {'again ' * (n % 3)}{n}") for n in range(600)
]
"""Messages over several batches of 256, words held by many and by one."""
QUERIES = ["plum", "w3", "plum w3 again", "again", "417", "hello", "b", "absent"]


async def test_the_word_index_is_packed_in_place_and_unpacked_back(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    await migrate.upgrade(str(db), "0004")
    written = populate(db, "0004", {"long": LONG})
    await migrate.upgrade(str(db), "0008")  # 0006 indexed every message, a row per word
    unpacked = word_rows(db)
    assert len(unpacked) > 600 * 3
    await migrate.upgrade(str(db))
    assert "search_postings" in tables(db)
    assert "search_words" not in tables(db)
    async with open_store(str(db)) as store:
        assert await store.integrity() == []  # the rows hold every message's words
        found = {query: await store.search(query, limit=1000) for query in QUERIES}
    async with open_store(str(tmp_path / "fresh.db")) as fresh:  # the same, by the store
        for session_id, lines in written.items():
            await fresh.create(SessionMeta(id=session_id))
            await fresh.append_many(session_id, [decode_entry(line) for line in lines[1:]])
        for query in QUERIES:  # the same hits, in the same order
            hits = await fresh.search(query, limit=1000)
            assert [(h.session_id, h.seq) for h in hits] == [
                (h.session_id, h.seq) for h in found[query]
            ]
    assert [hit.seq for hit in found["417"]] == [418]
    assert len(found["plum"]) == 600
    assert {hit.seq for hit in found["plum w3 again"]} == {
        n + 1 for n in range(600) if n % 7 == 3 and n % 3
    }
    assert found["absent"] == []
    # Unpacked back, the rows are what they were.
    downgraded = alembic("-x", f"url=sqlite:///{db}", "downgrade", "0008")
    assert downgraded.returncode == 0, downgraded.stderr
    assert word_rows(db) == unpacked
    await migrate.upgrade(str(db))
    await assert_kept_and_chained(str(db), written)
