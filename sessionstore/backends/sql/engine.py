"""Engines for the SQL store: target parsing, SQLite pragmas, transactions.

SQLite runs in WAL mode, foreign keys on, ``secure_delete`` on, new files
with ``auto_vacuum=INCREMENTAL``, and
``synchronous`` NORMAL or FULL by the store's durability; its transactions
are begun by us (the driver's implicit BEGIN comes too late for a
consistent read), ``BEGIN IMMEDIATE`` to write, so that a writer waits its
turn up front instead of failing halfway. PostgreSQL runs on psycopg 3.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool, PoolProxiedConnection

from sessionstore.backends.checks import Durability, check_durability
from sessionstore.backends.targets import SQLITE_SUFFIXES, is_sql_target
from sessionstore.errors import ConfigurationError, StorageError

WRITE = "sessionstore_write"
"""Execution option: begin the transaction as a writer (``BEGIN IMMEDIATE``)."""

DEFAULT_BUSY_TIMEOUT = 30.0


# PostgreSQL: serialization failure, deadlock, lock not available.
_RETRY_STATES = {"40001", "40P01", "55P03"}


def is_busy(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) in _RETRY_STATES:
        return True
    text = str(orig).lower()
    return isinstance(orig, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def parse_target(target: str) -> URL:
    """The URL a SQL store target names."""
    if not is_sql_target(target):
        raise ConfigurationError(
            f"{target!r} is not a SQL database: use sqlite:///file.db, postgresql://..., "
            "or a path ending in " + ", ".join(SQLITE_SUFFIXES)
        )
    if "://" not in target:
        return URL.create("sqlite", database=os.path.abspath(target))
    try:
        url = make_url(target)
    except ArgumentError as exc:
        raise ConfigurationError(f"{target!r} is not a database URL: {exc}") from None
    if url.get_backend_name() == "postgresql":
        if url.get_driver_name() not in ("psycopg", "psycopg2"):
            raise ConfigurationError(
                f"{target!r}: PostgreSQL runs on psycopg 3 here (use postgresql:// or "
                "postgresql+psycopg://)"
            )
        return url.set(drivername="postgresql+psycopg")
    if url.get_driver_name() not in ("pysqlite", "aiosqlite"):
        raise ConfigurationError(
            f"{target!r}: unsupported SQLite driver {url.get_driver_name()!r} "
            "(use sqlite:// or sqlite+aiosqlite://)"
        )
    if not url.database or url.database == ":memory:":
        raise ConfigurationError(
            f"{target!r}: an in-memory SQLite database cannot be shared; use memory://"
        )
    return url


def sync_url(target: str) -> URL:
    """The blocking-driver URL of a target, for alembic's command line."""
    url = parse_target(target)
    return url.set(drivername="sqlite+pysqlite") if is_sqlite(url) else url


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def describe(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def create_private_file(path: str, what: str = "database") -> None:
    """Create a SQLite file private to its owner, if it is new (its -wal and
    -shm files take its permissions)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise StorageError(f"cannot create {what} {path}: {exc.strerror}") from exc
    os.close(fd)


def _check(durability: Durability, busy_timeout: float) -> None:
    check_durability(durability)
    if not busy_timeout >= 0:
        raise ConfigurationError(f"busy_timeout must be >= 0 seconds, not {busy_timeout!r}")


def _install_events(engine: Engine, durability: Durability, busy_timeout: float) -> None:
    default = durability.upper()
    pragmas = [
        # Before anything writes the header of a new file (switching it to WAL
        # does): a new database keeps the map that lets `vacuum` give erased
        # pages back in small steps. An older file keeps its mode until a
        # full VACUUM converts it (sessionstore/backends/sql/vacuum.py).
        "PRAGMA auto_vacuum=INCREMENTAL",
        "PRAGMA journal_mode=WAL",
        "PRAGMA foreign_keys=ON",
        # Deleted content is overwritten with zeros: the rows an erase
        # deletes (nothing else is ever deleted) leave no bytes behind.
        "PRAGMA secure_delete=ON",
        f"PRAGMA busy_timeout={round(busy_timeout * 1000)}",
    ]

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, record: Any) -> None:
        # The driver must not begin transactions on its own; begin_on_driver does.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        except UnicodeDecodeError as exc:
            # A damaged schema's text (a flipped byte in sqlite_master) fails
            # to decode: the file is malformed, as sqlite3 says of other damage,
            # and so it reaches the caller as the store's error, translated.
            raise sqlite3.DatabaseError(f"database disk image is malformed ({exc})") from exc
        finally:
            cursor.close()
        record.info[_DEFAULT_SYNCHRONOUS] = default

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        pooled = connection.connection
        if not pooled.dbapi_connection.in_transaction:  # type: ignore[union-attr]
            # Not begun on the driver already (`Runner`): a steps' or
            # alembic's command line's transaction.
            begin_on_driver(pooled, write=connection.get_execution_options().get(WRITE, False))


_DEFAULT_SYNCHRONOUS = "sessionstore_synchronous"


def begin_on_driver(pooled: PoolProxiedConnection, *, write: bool, durable: bool = False) -> None:
    """Begin a SQLite transaction: ``BEGIN IMMEDIATE`` to write, ``BEGIN`` to read.

    ``synchronous`` can only change outside a transaction: set here when it
    must. Straight to the driver: SQLAlchemy's path costs more than these do.
    """
    wanted = "FULL" if durable else pooled.info[_DEFAULT_SYNCHRONOUS]
    cursor = pooled.dbapi_connection.cursor()  # type: ignore[union-attr]
    if pooled.info.get("synchronous") != wanted:
        cursor.execute(f"PRAGMA synchronous={wanted}")
        pooled.info["synchronous"] = wanted
    cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    cursor.close()


def open_sync_engine(
    target: str,
    *,
    durability: Durability = "full",
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    pooled: bool = False,
) -> Engine:
    """A blocking engine; ``pooled`` keeps connections open between uses (the
    store's), else each is closed after use (alembic's command line)."""
    _check(durability, busy_timeout)
    url = sync_url(target)
    pool: dict[str, Any] = {} if pooled else {"poolclass": NullPool}
    if not is_sqlite(url):
        try:
            return create_engine(url, pool_pre_ping=True, **pool)
        except ImportError as exc:
            raise ConfigurationError(
                f"PostgreSQL needs psycopg: pip install 'sessionstore[postgres]' ({exc})"
            ) from None
    assert url.database is not None  # parse_target refuses URLs without one
    create_private_file(url.database)
    if pooled:  # one connection per thread using the store, however many threads
        pool["max_overflow"] = -1
    engine = create_engine(url, **pool)
    _install_events(engine, durability, busy_timeout)
    return engine
