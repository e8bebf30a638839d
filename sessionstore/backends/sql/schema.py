"""Which schema a database holds, and creating it: the check every open runs.

The revision is kept in the table ``sessionstore_alembic_version``, so a
database shared with an application that runs alembic itself keeps the two
histories apart. A database at `REVISION`, the newest this code knows, is
recognised by one query; alembic (and its migration scripts) load only to
create the schema, or to say what an unknown revision is.

The migrations are the one definition of the schema. A new database is
given it by replaying what they did, kept in two files generated from
them and shipped beside them (``migrations/snapshot.sqlite.json``,
``migrations/snapshot.postgresql.json``; ``scripts/schema_snapshot.py``
writes them, and tests compare a new store with a migrated database,
object for object and row for row), so a suite or a service making many
small stores never runs alembic, and nothing is kept in the process:

* SQLite (`_SqliteSchema`): every object's SQL as the migrations left it
  in ``sqlite_master`` (verbatim), and every row they wrote (the revision,
  the word index's mark), written to the new database in one transaction:
  a tenth of alembic's cost.
* PostgreSQL (`_PostgresSchema`): every statement the migrations send to
  the driver, with its parameters, sent again in the caller's
  transaction. Nothing in them names the schema: it is the connection's
  ``search_path``.
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

__all__ = [
    "REVISION",
    "SNAPSHOTS",
    "VERSION_TABLE",
    "alembic_config",
    "ensure_schema",
    "revision_of",
    "snapshot",
]

VERSION_TABLE = "sessionstore_alembic_version"
"""Where alembic records the revision of sessionstore's schema."""

REVISION = "0012"
"""The newest revision of the shipped migrations (a test checks it is alembic's head)."""

_SCHEMA_LOCK = 0x5E5510  # the advisory lock PostgreSQL creators of the schema take
_VERSION = table(VERSION_TABLE, column("version_num"))


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic `Config` for the shipped migrations, built in code.

    Args:
        connection: a connection to run on, passed to ``env.py`` through
            ``config.attributes``; without one, ``env.py`` opens the URL it
            is given on the command line.
    """
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
    """Check that the database has the current schema; create it when empty.

    With ``create=False`` nothing is written: an empty database only makes
    it return True. With ``create=True`` it must run inside the caller's
    write transaction, so two processes opening one new database do not
    both create it.

    Returns:
        Whether the schema is still to be created.

    Raises:
        SchemaOutdatedError: the schema is older; it names the upgrade command.
        SchemaTooNewError: the schema comes from a newer sessionstore.
        SchemaError: our tables exist without a recorded revision.
    """
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
                _SqliteSchema.write(connection)
            else:
                _PostgresSchema.write(connection)
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


SNAPSHOTS = {"sqlite": "snapshot.sqlite.json", "postgresql": "snapshot.postgresql.json"}
"""The file of ``sessionstore.migrations`` keeping what the migrations make, per dialect."""


def snapshot(connection: Connection) -> str:
    """What the migrations make, run on ``connection`` (an empty SQLite
    database, or an empty PostgreSQL schema first on its ``search_path``,
    in a transaction), as the text of its `SNAPSHOTS` file."""
    if connection.dialect.name == "sqlite":
        made: dict[str, Any] = _SqliteSchema.made(connection)
    else:
        made = {"sent": _PostgresSchema.made(connection)}
    return encode_value({"revision": REVISION, **made}) + "\n"


def _snapshot(dialect: str) -> dict[str, Any]:
    """The dialect's `SNAPSHOTS` file, read.

    Raises:
        SchemaError: it is not this code's revision (a migration was added
            and the snapshot not written again: ``scripts/schema_snapshot.py``).
    """
    text = resources.files("sessionstore.migrations").joinpath(SNAPSHOTS[dialect]).read_text()
    kept: dict[str, Any] = decode_value(text)
    if kept.get("revision") != REVISION:
        raise SchemaError(
            f"sessionstore.migrations/{SNAPSHOTS[dialect]} holds revision "
            f"{kept.get('revision')!r}, not {REVISION!r}: write it again with "
            "scripts/schema_snapshot.py"
        )
    return kept


class _SqliteSchema:
    """The objects and rows the migrations make in a new SQLite database."""

    # Created in this order, each kind in the order the migrations made it:
    # a trigger's body may name any table.
    _KINDS = ("table", "index", "view", "trigger")

    @classmethod
    def made(cls, connection: Connection) -> dict[str, Any]:
        """Run the migrations on ``connection``'s empty database; what they made."""
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
        statements = [sql for kind in cls._KINDS for made, sql in objects if made == kind]
        return {"statements": statements, "rows": rows}

    @staticmethod
    def write(connection: Connection) -> None:
        """Make the schema in ``connection``'s database (empty, in its write transaction)."""
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


class _PostgresSchema:
    """The statements the migrations send to a new PostgreSQL schema."""

    @staticmethod
    def write(connection: Connection) -> None:
        """Make the schema in ``connection``'s empty schema, in its write transaction."""
        cursor = connection.connection.cursor()
        try:
            for statement, parameters, many in _snapshot("postgresql")["sent"]:
                if many:
                    cursor.executemany(statement, parameters)
                else:
                    cursor.execute(statement, parameters)
        finally:
            cursor.close()

    @staticmethod
    def made(connection: Connection) -> list[list[Any]]:
        """Run the migrations on ``connection``, keeping every statement they
        send, with its parameters (and whether it ran for many)."""
        from alembic import command

        sent: list[list[Any]] = []

        def keep(
            _c: Any, _cursor: Any, statement: str, parameters: Any, _x: Any, many: bool
        ) -> None:
            sent.append([statement, _plain(parameters), many])

        event.listen(connection, "before_cursor_execute", keep)
        try:
            command.upgrade(alembic_config(connection), "head")
        finally:
            event.remove(connection, "before_cursor_execute", keep)
        return sent


def _plain(value: Any) -> Any:
    """A statement's parameters as JSON holds them (SQLAlchemy passes names
    as ``quoted_name``, a ``str``; tuples become lists, as the driver takes them)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _known(revision: str) -> bool:
    """Whether the shipped migrations hold ``revision``."""
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False
