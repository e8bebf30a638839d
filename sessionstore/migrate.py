"""Run the alembic migrations from code, and read a database's revision.

The migrations ship inside the package, so an installed wheel migrates too
(``await sessionstore.migrate.upgrade("sqlite:///sessions.db")``; from a
checkout, ``alembic -x url=sqlite:///sessions.db upgrade head``). The
revision is kept in ``sessionstore_alembic_version``, apart from an
application's own. alembic loads only for `upgrade` and `head`: `current`
is one query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionstore.backends.sql.database import Database, Kind
from sessionstore.backends.sql.schema import VERSION_TABLE, alembic_config, revision_of
from sessionstore.errors import StorageError

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["VERSION_TABLE", "alembic_config", "current", "head", "tables", "upgrade"]


def head() -> str:
    """The newest revision this code knows."""
    from alembic.script import ScriptDirectory

    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None  # the package ships at least one revision
    return revision


async def upgrade(target: str, revision: str = "head") -> None:
    """Upgrade a database to ``revision`` (default: the newest).

    Args:
        target: a SQL store target (``sqlite:///sessions.db``, ``sessions.db``).
        revision: the alembic revision to reach.

    Raises:
        ConfigurationError: the target is not a SQL database.
        StorageError: the database could not be reached or migrated.
    """
    from alembic import command
    from alembic.util.exc import CommandError

    def migrate(connection: Connection) -> None:
        try:
            # Alembic runs in the caller's transaction only when
            # SQLAlchemy's connection is in one: begun on the driver, it
            # is not yet.
            with connection.begin():
                command.upgrade(alembic_config(connection), revision)
        except CommandError as exc:  # alembic's own: an unknown revision
            raise StorageError(f"{database.where}: migration failed: {exc}") from exc

    database = await Database.open(target, check_schema=False)
    try:
        await database.transaction(Kind.WRITE, None, migrate)
    finally:
        await database.close()


async def current(target: str) -> str | None:
    """The revision a database is at; None for a database never migrated."""
    database = await Database.open(target, check_schema=False)
    try:
        return await database.transaction(Kind.READ, None, revision_of)
    finally:
        await database.close()


async def tables(target: str) -> list[str]:
    """The names of the tables a database holds, in order: whose it is,
    when it holds no sessionstore schema."""
    from sqlalchemy import inspect

    database = await Database.open(target, check_schema=False)
    try:
        return await database.transaction(
            Kind.READ, None, lambda connection: sorted(inspect(connection).get_table_names())
        )
    finally:
        await database.close()
