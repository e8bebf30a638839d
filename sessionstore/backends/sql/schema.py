"""Which schema a database holds, and creating it: the check every open runs.

The revision is kept in ``sessionstore_alembic_version``, apart from an
application's own alembic history. A database at `REVISION` is recognised
by one query. A new one is given the schema by replaying what the
migrations did, kept in the `SNAPSHOTS` files beside them
(``scripts/schema_snapshot.py`` writes them; tests compare a new store with
a migrated database), so making a store never runs alembic: on SQLite
every object's SQL and row as the migrations left them, on PostgreSQL
every statement they sent (naming no schema: the ``search_path`` does).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, column, event, func, inspect, select, table

from sessionstore.backends.sql.tables import metadata
from sessionstore.errors import SchemaError, SchemaOutdatedError, SchemaTooNewError
from sessionstore.wire import decode_value, encode_value

if TYPE_CHECKING:
    from alembic.config import Config

VERSION_TABLE = "sessionstore_alembic_version"
REVISION = "0012"  # the newest shipped migration (a test checks it is alembic's head)

_SCHEMA_LOCK = 0x5E5510  # the advisory lock PostgreSQL creators of the schema take
_VERSION = table(VERSION_TABLE, column("version_num"))


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic `Config` for the shipped migrations, built in code; without
    a ``connection``, ``env.py`` opens the URL its command line gives."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(resources.files("sessionstore.migrations")))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def revision_of(connection: Connection) -> str | None:
    """The revision a database is at; None when it has none."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.execute(select(_VERSION.c.version_num)).scalar()


def _upgrade_command(target: str) -> str:
    return f"sessionstore migrate --db {target}  (or: alembic -x url={target} upgrade head)"


def ensure_schema(connection: Connection, target: str, *, create: bool) -> bool:
    """Check that the database has the current schema, creating it when empty
    with ``create`` (in the caller's write transaction); whether it is still
    to be created. An older schema's error names the upgrade command."""
    if create and connection.dialect.name == "postgresql":
        # One creator at a time; SQLite's write transaction already is one.
        connection.execute(select(func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
    current = revision_of(connection)
    if current == REVISION:
        return False
    if current is None:
        ours = set(inspect(connection).get_table_names()) & set(metadata.tables)
        if ours:
            raise SchemaError(
                f"{target}: tables {sorted(ours)} exist but no sessionstore revision is "
                "recorded; this database was not created by sessionstore"
            )
        if create:
            if connection.dialect.name == "sqlite":
                _sqlite_write(connection)
            else:
                _postgres_write(connection)
        return not create
    if not _known(current):
        raise SchemaTooNewError(
            f"{target}: schema revision {current!r} is newer than this sessionstore knows "
            f"(newest {REVISION!r}); upgrade sessionstore. Nothing was written."
        )
    raise SchemaOutdatedError(
        f"{target}: schema revision {current!r} is older than this sessionstore's "
        f"{REVISION!r}; upgrade the database with: {_upgrade_command(target)}"
    )


# The file of sessionstore.migrations keeping what the migrations make, per dialect.
SNAPSHOTS = {"sqlite": "snapshot.sqlite.json", "postgresql": "snapshot.postgresql.json"}


def snapshot(connection: Connection) -> str:
    """What the migrations make, run on ``connection`` (an empty database, or
    PostgreSQL schema first on its ``search_path``), as its `SNAPSHOTS` text."""
    if connection.dialect.name == "sqlite":
        made: dict[str, Any] = _sqlite_made(connection)
    else:
        made = {"sent": _postgres_made(connection)}
    return encode_value({"revision": REVISION, **made}) + "\n"


def _snapshot(dialect: str) -> dict[str, Any]:
    """The dialect's `SNAPSHOTS` file, read; refused when of another revision."""
    text = resources.files("sessionstore.migrations").joinpath(SNAPSHOTS[dialect]).read_text()
    kept: dict[str, Any] = decode_value(text)
    if kept.get("revision") != REVISION:
        raise SchemaError(
            f"sessionstore.migrations/{SNAPSHOTS[dialect]} holds revision "
            f"{kept.get('revision')!r}, not {REVISION!r}: write it again with "
            "scripts/schema_snapshot.py"
        )
    return kept


# SQLite objects are created in this order, each kind in the order the
# migrations made it: a trigger's body may name any table.
_KINDS = ("table", "index", "view", "trigger")


def _sqlite_made(connection: Connection) -> dict[str, Any]:
    """Run the migrations on an empty SQLite database: its objects' SQL and rows."""
    from alembic import command

    command.upgrade(alembic_config(connection), "head")
    objects = connection.exec_driver_sql(
        "SELECT type, sql FROM sqlite_master "
        "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).all()
    rows = {}
    for (name,) in connection.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid"
    ).all():
        found = connection.exec_driver_sql(f'SELECT * FROM "{name}"').all()
        if found:
            rows[name] = [list(row) for row in found]
    statements = [sql for kind in _KINDS for made, sql in objects if made == kind]
    return {"statements": statements, "rows": rows}


def _sqlite_write(connection: Connection) -> None:
    kept = _snapshot("sqlite")
    driver = connection.connection.driver_connection
    assert driver is not None
    cursor = driver.cursor()
    try:
        for statement in kept["statements"]:
            cursor.execute(statement)
        for name, rows in kept["rows"].items():
            places = ", ".join("?" * len(rows[0]))
            cursor.executemany(f'INSERT INTO "{name}" VALUES ({places})', rows)
    finally:
        cursor.close()


def _postgres_write(connection: Connection) -> None:
    cursor = connection.connection.cursor()
    try:
        for statement, parameters, many in _snapshot("postgresql")["sent"]:
            if many:
                cursor.executemany(statement, parameters)
            else:
                cursor.execute(statement, parameters)
    finally:
        cursor.close()


def _postgres_made(connection: Connection) -> list[list[Any]]:
    """Run the migrations on an empty PostgreSQL schema: every statement sent,
    with its parameters and whether it ran for many."""
    from alembic import command

    sent: list[list[Any]] = []

    def keep(_c: Any, _cursor: Any, statement: str, parameters: Any, _x: Any, many: bool) -> None:
        sent.append([statement, _plain(parameters), many])

    event.listen(connection, "before_cursor_execute", keep)
    try:
        command.upgrade(alembic_config(connection), "head")
    finally:
        event.remove(connection, "before_cursor_execute", keep)
    return sent


def _plain(value: Any) -> Any:
    """A statement's parameters as JSON holds them (a ``quoted_name`` a plain
    ``str``, tuples lists, as the driver takes them)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _known(revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False
