"""Which schema a database holds, and creating it: the check every open runs.

The revision is kept in the table ``sessionstore_alembic_version``, so a
database shared with an application that runs alembic itself keeps the two
histories apart. A database at `REVISION`, the newest this code knows, is
recognised by one query; alembic (and its migration scripts) load only to
create the schema, or to say what an unknown revision is.

The migrations are the one definition of the schema. A new database is
given it by replaying what they did, so a suite or a service making many
small stores pays for alembic once per process (tests compare the result
with a migrated database, object for object and row for row):

* SQLite (`_SqliteSchema`): the first new database a process creates runs
  the migrations on a private in-memory database, whose every object's
  SQL (``sqlite_master`` keeps it verbatim) and every row (the revision,
  the word index's mark) are then written to each new database in one
  transaction: a tenth of alembic's cost.
* PostgreSQL (`_PostgresSchema`): the first new schema a process creates
  (per server version) runs the migrations there, and every statement
  they send to the driver, with its parameters, is kept; each later one
  is sent the same statements, in the caller's transaction. Nothing in
  them names the schema: it is the connection's ``search_path``.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import Connection, column, event, func, inspect, select, table

from sessionstore.backends.sql.tables import metadata
from sessionstore.errors import SchemaError, SchemaOutdatedError, SchemaTooNewError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["REVISION", "VERSION_TABLE", "alembic_config", "ensure_schema", "revision_of"]

VERSION_TABLE = "sessionstore_alembic_version"
"""Where alembic records the revision of sessionstore's schema."""

REVISION = "0011"
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
                _sqlite_schema().write(connection)
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


class _SqliteSchema:
    """The objects and rows the migrations make in a new SQLite database."""

    # Created in this order, each kind in the order the migrations made it:
    # a trigger's body may name any table.
    _KINDS = ("table", "index", "view", "trigger")

    def __init__(self, objects: list[tuple[str, str]], rows: dict[str, list[tuple[Any, ...]]]):
        self.statements = [sql for kind in self._KINDS for made, sql in objects if made == kind]
        self.rows = rows

    @classmethod
    def made(cls) -> _SqliteSchema:
        """Run the migrations on a private in-memory database, and keep what they made."""
        from alembic import command
        from sqlalchemy import create_engine
        from sqlalchemy.pool import StaticPool

        engine = create_engine("sqlite://", poolclass=StaticPool)
        try:
            with engine.begin() as connection:
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
                        rows[name] = [tuple(row) for row in found]
        finally:
            engine.dispose()
        return cls([(kind, sql) for kind, sql in objects], rows)

    def write(self, connection: Connection) -> None:
        """Make the schema in ``connection``'s database (empty, in its write transaction)."""
        driver = connection.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor()
        try:
            for statement in self.statements:
                cursor.execute(statement)
            for name, rows in self.rows.items():
                places = ", ".join("?" * len(rows[0]))
                cursor.executemany(f'INSERT INTO "{name}" VALUES ({places})', rows)
        finally:
            cursor.close()


@functools.cache
def _sqlite_schema() -> _SqliteSchema:
    """What the migrations make, made once per process: a constant, as the
    migrations shipped with this code are."""
    return _SqliteSchema.made()


class _PostgresSchema:
    """The statements the migrations send to a new PostgreSQL schema."""

    # (statement, parameters, executemany) as given to the driver's cursor,
    # kept per server version, since the dialect may word them by version.
    _sent: ClassVar[dict[Any, list[tuple[str, Any, bool]]]] = {}

    @classmethod
    def write(cls, connection: Connection) -> None:
        """Make the schema in ``connection``'s empty schema, in its write transaction."""
        version = connection.dialect.server_version_info
        sent = cls._sent.get(version)
        if sent is None:
            cls._sent[version] = cls._migrate(connection)
            return
        cursor = connection.connection.cursor()
        try:
            for statement, parameters, many in sent:
                if many:
                    cursor.executemany(statement, parameters)
                else:
                    cursor.execute(statement, parameters)
        finally:
            cursor.close()

    @staticmethod
    def _migrate(connection: Connection) -> list[tuple[str, Any, bool]]:
        """Run the migrations on ``connection``, keeping every statement they send."""
        from alembic import command

        sent: list[tuple[str, Any, bool]] = []

        def keep(
            _c: Any, _cursor: Any, statement: str, parameters: Any, _x: Any, many: bool
        ) -> None:
            sent.append((statement, parameters, many))

        event.listen(connection, "before_cursor_execute", keep)
        try:
            command.upgrade(alembic_config(connection), "head")
        finally:
            event.remove(connection, "before_cursor_execute", keep)
        return sent


def _known(revision: str) -> bool:
    """Whether the shipped migrations hold ``revision``."""
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False
