"""Which schema a database holds, and creating it: the check every open runs.

The revision is kept in the table ``sessionstore_alembic_version``, so a
database shared with an application that runs alembic itself keeps the two
histories apart. A database at `REVISION`, the newest this code knows, is
recognised by one query; alembic (and its migration scripts) load only to
create the schema, or to say what an unknown revision is.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from sqlalchemy import Connection, column, func, inspect, select, table

from sessionstore.backends.sql.tables import metadata
from sessionstore.errors import SchemaError, SchemaOutdatedError, SchemaTooNewError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["REVISION", "VERSION_TABLE", "alembic_config", "ensure_schema", "revision_of"]

VERSION_TABLE = "sessionstore_alembic_version"
"""Where alembic records the revision of sessionstore's schema."""

REVISION = "0008"
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
            from alembic import command

            command.upgrade(alembic_config(connection), "head")
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


def _known(revision: str) -> bool:
    """Whether the shipped migrations hold ``revision``."""
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False
