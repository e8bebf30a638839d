"""Run the alembic migrations from code, and check a database's schema.

The migrations ship inside the package (``sessionstore.migrations``), so an
installed wheel migrates a database as well as a checkout does::

    await sessionstore.migrate.upgrade("sqlite:///sessions.db")

From a checkout, alembic's own command line runs the same migrations::

    alembic -x url=sqlite:///sessions.db upgrade head

The revision is kept in the table ``sessionstore_alembic_version``, so a
database shared with an application that runs alembic itself keeps the
two histories apart.
"""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, func, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from sessionstore.backends.sql.engine import WRITE, describe, open_async_engine
from sessionstore.backends.sql.tables import metadata
from sessionstore.errors import SchemaError, SchemaOutdatedError, SchemaTooNewError, StorageError

__all__ = ["VERSION_TABLE", "current", "head", "upgrade"]

VERSION_TABLE = "sessionstore_alembic_version"
_SCHEMA_LOCK = 0x5E5510  # the advisory lock PostgreSQL creators of the schema take


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic `Config` for the shipped migrations, built in code.

    Args:
        connection: a connection to run on, passed to ``env.py`` through
            ``config.attributes``; without one, ``env.py`` opens the URL it
            is given on the command line.
    """
    config = Config()
    config.set_main_option("script_location", str(resources.files("sessionstore.migrations")))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this code knows."""
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None  # the package ships at least one revision
    return revision


def revision_of(connection: Connection) -> str | None:
    """The revision a database is at; None when it has none."""
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


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
    newest = head()
    if current == newest:
        return False
    if current is None:
        ours = set(inspect(connection).get_table_names()) & set(metadata.tables)
        if ours:
            raise SchemaError(
                f"{target}: tables {sorted(ours)} exist but no sessionstore revision is "
                "recorded; this database was not created by sessionstore"
            )
        if create:
            command.upgrade(alembic_config(connection), "head")
        return not create
    try:
        known = ScriptDirectory.from_config(alembic_config()).get_revision(current)
    except CommandError:
        known = None
    if known is None:
        raise SchemaTooNewError(
            f"{target}: schema revision {current!r} is newer than this sessionstore knows "
            f"(newest {newest!r}); upgrade sessionstore. Nothing was written."
        )
    raise SchemaOutdatedError(
        f"{target}: schema revision {current!r} is older than this sessionstore's "
        f"{newest!r}; upgrade the database with: {_upgrade_command(target)}"
    )


async def upgrade(target: str, revision: str = "head") -> None:
    """Upgrade a database to ``revision`` (default: the newest).

    Args:
        target: a SQL store target (``sqlite:///sessions.db``, ``sessions.db``).
        revision: the alembic revision to reach.

    Raises:
        ConfigurationError: the target is not a SQL database.
        StorageError: the database could not be reached or migrated.
    """
    engine = open_async_engine(target)
    try:
        async with engine.connect() as connection:
            connection = await connection.execution_options(**{WRITE: True})
            async with connection.begin():
                await connection.run_sync(
                    lambda sync: command.upgrade(alembic_config(sync), revision)
                )
    except (SQLAlchemyError, CommandError) as exc:
        raise StorageError(f"{describe(engine.url)}: migration failed: {exc}") from exc
    finally:
        await engine.dispose()


async def current(target: str) -> str | None:
    """The revision a database is at; None for a database never migrated."""
    engine = open_async_engine(target)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(revision_of)
    except SQLAlchemyError as exc:
        raise StorageError(f"{describe(engine.url)}: {exc}") from exc
    finally:
        await engine.dispose()
