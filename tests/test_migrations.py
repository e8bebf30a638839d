"""Migrations: alembic from the command line and from code, schema checks on open."""

import os
import sqlite3
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from sessionstore import (
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
    SessionMeta,
    migrate,
    open_store,
)
from sessionstore.backends.sql import schema

ROOT = Path(__file__).resolve().parent.parent
TABLES = {"sessions", "entries", "journal_lines"}


def alembic(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run alembic's command line from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


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


def test_alembic_check_finds_no_drift_between_tables_and_migrations(tmp_path: Path) -> None:
    env = {"SESSIONSTORE_URL": f"sqlite:///{tmp_path / 'env.db'}"}
    assert alembic("upgrade", "head", env=env).returncode == 0
    checked = alembic("check", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No new upgrade operations detected" in checked.stdout + checked.stderr


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
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)],
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
