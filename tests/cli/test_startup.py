"""What a run of the command line loads: only what its command uses.

Each test runs the command in a new process, as ``python -m sessionstore``
does, and reads the modules loaded when it exits.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import Message, MessageEntry, SessionMeta, open_store
from sessionstore.cli import build_parser
from sessionstore.cli.parser import LazyCommand

ROOT = Path(__file__).resolve().parents[2]
COMMAND_MODULES = [
    "sessionstore.cli.archives",
    "sessionstore.cli.browse",
    "sessionstore.cli.commands",
    "sessionstore.cli.effects",
    "sessionstore.cli.search",
    "sessionstore.cli.show",
]

# python -m sessionstore, writing the names in sys.modules to argv[1] at exit
# (after the command's own sys.exit). atexit and runpy load nothing of ours.
RUN_AND_LIST_MODULES = """
import atexit, runpy, sys

def list_modules(path=sys.argv[1]):
    with open(path, "w") as out:
        out.write("\\n".join(sorted(sys.modules)))

atexit.register(list_modules)
sys.argv = ["sessionstore", *sys.argv[2:]]
runpy.run_module("sessionstore", run_name="__main__", alter_sys=True)
"""


def imports_of(*args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the command line piped; what it did and every module it loaded."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("SESSIONSTORE_DB", None)
    listed = tmp_path / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_MODULES, str(listed), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return done, set(listed.read_text().split("\n"))


def loaded(modules: set[str], *packages: str) -> list[str]:
    """The modules of ``packages`` (each with its submodules) among ``modules``."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A SQLite store made and migrated before the test: its path and a session's id."""
    db = str(tmp_path_factory.mktemp("startup") / "sessions.db")

    async def make() -> str:
        async with open_store(db) as opened:
            session_id = await opened.create(SessionMeta.new())
            for n in range(30):
                await opened.append(session_id, MessageEntry.new(Message.user(f"turn {n}")))
            return session_id

    return db, asyncio.run(make())


def test_version_loads_the_parser_and_no_command(tmp_path: Path) -> None:
    done, modules = imports_of("--version", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sessionstore ")
    assert "sessionstore.cli.parser" in modules  # what was read is the real import list
    heavy = ("sqlalchemy", "alembic", "sessionstore.archive", "rich", "asyncio")
    assert loaded(modules, *heavy, *COMMAND_MODULES, "sessionstore.cli.running") == []


def test_help_of_a_command_loads_no_command(tmp_path: Path) -> None:
    done, modules = imports_of("ls", "--help", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "sessionstore ls" in done.stdout
    assert loaded(modules, "sqlalchemy", "alembic", *COMMAND_MODULES) == []


def test_ls_of_an_existing_sqlite_store_loads_neither_alembic_nor_other_commands(
    store: tuple[str, str], tmp_path: Path
) -> None:
    db, session_id = store
    done, modules = imports_of("ls", "--db", db, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert session_id in done.stdout
    assert "sqlalchemy" in modules  # it did open the SQL store
    assert loaded(modules, "alembic", "sessionstore.archive") == []
    assert loaded(modules, *COMMAND_MODULES) == ["sessionstore.cli.browse"]


def test_show_tail_of_an_existing_sqlite_store_loads_no_alembic(
    store: tuple[str, str], tmp_path: Path
) -> None:
    db, session_id = store
    done, modules = imports_of("show", session_id, "--tail", "20", "--db", db, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 + 20  # the header line, then the last 20
    assert "turn 29" in done.stdout
    assert loaded(modules, "alembic", "sessionstore.archive") == []
    assert loaded(modules, *COMMAND_MODULES) == ["sessionstore.cli.show"]


@pytest.mark.parametrize(
    ("command", "module"), [("head", "commands"), ("html", "show"), ("title", "show")]
)
def test_a_command_loads_its_module_and_neither_the_demo_nor_the_archive(
    store: tuple[str, str], tmp_path: Path, command: str, module: str
) -> None:
    db, session_id = store
    argv = [command] if command == "head" else [command, session_id]
    done, modules = imports_of(*argv, "--db", db, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert loaded(modules, *COMMAND_MODULES) == [f"sessionstore.cli.{module}"]
    assert loaded(modules, "alembic", "sessionstore.archive", "sessionstore.demo") == []


def test_reading_a_database_without_the_schema_refuses_it_without_alembic(
    tmp_path: Path,
) -> None:
    db = tmp_path / "other.db"
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")  # another application's
    done, modules = imports_of("ls", "--db", str(db), tmp_path=tmp_path)
    assert done.returncode == 1
    assert "is not a sessionstore database: it holds other tables (notes)" in done.stderr
    assert loaded(modules, "alembic") == []


def test_migrate_loads_alembic(tmp_path: Path) -> None:
    """The other side of the tests above: a migration does load alembic, so
    its absence from their imports is not an accident of how they are read."""
    done, modules = imports_of("migrate", "--db", str(tmp_path / "new.db"), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "alembic" in modules


def test_every_command_names_a_coroutine_function_of_its_module() -> None:
    parser = build_parser()
    commands = next(a.choices for a in parser._actions if a.dest == "command")
    assert isinstance(commands, dict)
    assert commands
    for name, subparser in commands.items():
        run = subparser.get_default("run")
        assert isinstance(run, LazyCommand), name
        assert run.name == f"run_{name}"
        assert inspect.iscoroutinefunction(run.load()), name
