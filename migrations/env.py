"""The alembic environment of sessionstore.

Two ways in:

* From code (`sessionstore.migrate`): the caller passes an open connection,
  already in a write transaction, through ``config.attributes``.
* From alembic's command line in the repository root: the database comes
  from ``-x url=...`` or the ``SESSIONSTORE_DB`` environment variable (the
  one the ``sessionstore`` command reads; ``SESSIONSTORE_URL``, its former
  name here, is still read, with a warning), and is opened with a blocking
  engine (no event loop is started here).
"""

from __future__ import annotations

import os
import sys
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from sessionstore.backends.sql.engine import WRITE, open_sync_engine
from sessionstore.backends.sql.schema import VERSION_TABLE

config = context.config


def run_on(connection: Connection) -> None:
    # No target metadata: the migrations are the schema's one definition,
    # written by hand, not generated from the tables the queries name.
    context.configure(connection=connection, version_table=VERSION_TABLE, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_from_command_line() -> None:
    # Only the command line configures logging: a host application's own
    # logging is left alone when migrations run from code.
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("SESSIONSTORE_DB")
    if not url and os.environ.get("SESSIONSTORE_URL"):
        url = os.environ["SESSIONSTORE_URL"]
        print("SESSIONSTORE_URL is deprecated: set SESSIONSTORE_DB", file=sys.stderr)
    if not url:
        raise SystemExit(
            "no database given: use `alembic -x url=sqlite:///sessions.db ...` "
            "or set SESSIONSTORE_DB"
        )
    engine = open_sync_engine(url)
    try:
        with (
            engine.connect().execution_options(**{WRITE: True}) as connection,
            connection.begin(),
        ):
            run_on(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("sessionstore migrations run online only (no --sql)")

connection = config.attributes.get("connection")
if connection is None:
    run_from_command_line()
else:
    run_on(connection)
