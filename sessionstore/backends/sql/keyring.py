"""`SqlKeyring`: a store's wrapped data keys in a SQL database of their own
(anywhere but the store's own database and its backups), serving any
number of stores by id; docs/encryption.md. A SQLite keyring runs with a
rollback journal, ``secure_delete`` and ``synchronous=FULL``: a destroyed
key's bytes are overwritten, and every change survives a power loss.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Index,
    LargeBinary,
    MetaData,
    Table,
    Text,
    create_engine,
    delete,
    event,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateIndex, CreateTable

from sessionstore.backends.sql.engine import create_private_file, describe, is_sqlite, sync_url
from sessionstore.encryption.keyring import Keyring, Scope, WrappedKey
from sessionstore.errors import ConfigurationError, StorageError

_metadata = MetaData()
_stores = Table(
    "sessionstore_keyring_stores",
    _metadata,
    Column("store_id", Text, primary_key=True),
)
_keys = Table(
    "sessionstore_keyring_keys",
    _metadata,
    Column("store_id", Text, primary_key=True),
    Column("key_id", LargeBinary, primary_key=True),
    Column("scope", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("master", Text, nullable=False),
    Column("wrapped", LargeBinary, nullable=False),
    Column("doomed", Boolean, nullable=False, default=False),
    Index("ix_sessionstore_keyring_keys_name", "store_id", "scope", "name"),
)
_masters = Table(
    "sessionstore_keyring_masters",  # made after the others: a keyring may predate it
    _metadata,
    Column("store_id", Text, primary_key=True),
    Column("master", Text, nullable=False),  # wraps new data keys
    Column("retired", Text, nullable=False),  # those it replaced, newest first, space-separated
)
_COLUMNS = (_keys.c.key_id, _keys.c.scope, _keys.c.name, _keys.c.master, _keys.c.wrapped)


def keyring_url(target: str | os.PathLike[str]) -> URL:
    text = os.fspath(target)
    return sync_url(text if "://" in text else f"sqlite:///{os.path.abspath(text)}")


_LOCAL = {"", "localhost", "127.0.0.1", "::1"}


def same_database(one: URL, other: URL) -> bool:
    """Whether two URLs name one database (schemas and options aside); on this
    machine a server is named by its port alone, as its socket is."""
    if is_sqlite(one) or is_sqlite(other):
        if not (is_sqlite(one) and is_sqlite(other)) or not one.database or not other.database:
            return False
        if one.database == ":memory:" or other.database == ":memory:":
            return False
        return os.path.realpath(one.database) == os.path.realpath(other.database)
    if one.get_backend_name() != other.get_backend_name():
        return False

    def server(url: URL) -> tuple[str, str, str]:
        host = url.host or str(url.query.get("host") or "")
        local = host in _LOCAL or host.startswith("/")
        port = str(url.port or url.query.get("port") or 5432)
        return ("local" if local else host.lower(), port, url.database or url.username or "")

    return server(one) == server(other)


class SqlKeyring(Keyring):
    """Wrapped data keys in a SQL database.

    Args:
        target: a path (a SQLite file, created private to its owner), or a
            ``sqlite:///`` or ``postgresql://`` URL; never the store's own
            database.
    """

    def __init__(self, target: str | os.PathLike[str]) -> None:
        url = keyring_url(target)
        self._where = describe(url)
        self._store: str | None = None
        try:
            if is_sqlite(url):
                assert url.database is not None
                create_private_file(url.database, "keyring")
                self._engine = create_engine(url)
                event.listen(self._engine, "connect", _sqlite_pragmas)
            else:
                self._engine = create_engine(url, pool_pre_ping=True)
        except ImportError as exc:
            raise ConfigurationError(
                f"keyring {self._where}: PostgreSQL needs psycopg ({exc})"
            ) from None
        self._run(_create_tables)

    def __repr__(self) -> str:
        return f"SqlKeyring({self._where!r})"

    @property
    def where(self) -> str:
        return self._where

    def _run(self, body: Any) -> Any:
        try:
            with self._engine.begin() as conn:
                return body(conn)
        except SQLAlchemyError as exc:
            raise StorageError(f"keyring {self._where}: {exc.__class__.__name__}: {exc}") from exc

    def _mine(self) -> Any:
        if self._store is None:
            raise RuntimeError("a keyring serves a store once bound to it")
        return _keys.c.store_id == self._store

    def bind(self, store_id: str, *, create: bool) -> bool:
        def body(conn: Connection) -> bool:
            query = select(_stores.c.store_id).where(_stores.c.store_id == store_id)
            if conn.execute(query).first() is not None:
                return True
            if create:
                conn.execute(insert(_stores).values(store_id=store_id))
            return create

        served: bool = self._run(body)
        if served:
            self._store = store_id
        return served

    def _current(self, master: str) -> Any:
        """Whether ``master`` is current, locked for share on PostgreSQL: a
        change of master waits for the writes that checked it."""
        return (
            select(_masters.c.store_id)
            .where(_masters.c.store_id == self._store, _masters.c.master == master)
            .with_for_update(read=True)
        )

    def put(self, key: WrappedKey) -> bool:
        values = [literal(getattr(key, c.name), c.type) for c in _COLUMNS]
        kept = (
            insert(_keys)
            .from_select(
                [_keys.c.store_id, *(c.name for c in _COLUMNS)],
                select(literal(self._store, Text), *values).where(
                    self._current(key.master).exists()
                ),
            )
            .execution_options(preserve_rowcount=True)
        )  # an INSERT's rowcount is not kept else
        return bool(self._run(lambda conn: conn.execute(kept).rowcount) == 1)

    def masters(self) -> list[str]:
        query = select(_masters.c.master, _masters.c.retired).where(
            _masters.c.store_id == self._store
        )
        row = self._run(lambda conn: conn.execute(query).first())
        return [] if row is None else [row.master, *row.retired.split()]

    def set_master(self, master: str, *, was: list[str]) -> bool:
        if self._store is None:
            raise RuntimeError("a keyring serves a store once bound to it")
        retired = " ".join(fingerprint for fingerprint in was if fingerprint != master)
        if not was:
            dialect = sqlite_insert if is_sqlite(self._engine.url) else postgresql_insert
            change: Any = (
                dialect(_masters)
                .values(store_id=self._store, master=master, retired="")
                .on_conflict_do_nothing()
                .execution_options(preserve_rowcount=True)
            )
        else:
            change = (
                update(_masters)
                .where(_masters.c.store_id == self._store, _masters.c.master == was[0])
                .values(master=master, retired=retired)
            )
        return bool(self._run(lambda conn: conn.execute(change).rowcount) == 1)

    def _rows(self, *where: Any) -> list[WrappedKey]:
        query = select(*_COLUMNS, _keys.c.doomed).where(*where).order_by(_keys.c.key_id)
        return [WrappedKey(*row) for row in self._run(lambda conn: conn.execute(query).all())]

    def get(self, key_id: bytes) -> WrappedKey | None:
        return next(iter(self._rows(self._mine(), _keys.c.key_id == key_id)), None)

    def lookup(self, key_id: bytes) -> WrappedKey | None:
        return next(iter(self._rows(_keys.c.key_id == key_id)), None)

    def find(self, scope: Scope, name: str) -> WrappedKey | None:
        mine = (self._mine(), _keys.c.scope == scope, _keys.c.name == name)
        rows = self._rows(*mine, _keys.c.doomed.is_(False))
        if len(rows) > 1:
            ids = ", ".join(row.key_id.hex() for row in rows)
            raise StorageError(f"keyring {self._where}: {scope} {name!r} has keys {ids}")
        return rows[0] if rows else None

    def doom(self, key_id: bytes) -> None:
        change = update(_keys).where(self._mine(), _keys.c.key_id == key_id).values(doomed=True)
        self._run(lambda conn: conn.execute(change))

    def doomed(self) -> list[WrappedKey]:
        return self._rows(self._mine(), _keys.c.doomed.is_(True))

    def destroy(self, key_id: bytes) -> None:
        gone = delete(_keys).where(self._mine(), _keys.c.key_id == key_id)
        self._run(lambda conn: conn.execute(gone))

    def all_keys(self) -> list[WrappedKey]:
        return self._rows(self._mine())

    def rewrap(self, key_id: bytes, was: str, key: WrappedKey) -> bool:
        change = (
            update(_keys)
            .where(self._mine(), _keys.c.key_id == key_id, _keys.c.master == was)
            .where(self._current(key.master).exists())
            .values(master=key.master, wrapped=key.wrapped)
        )
        return bool(self._run(lambda conn: conn.execute(change).rowcount) == 1)

    def close(self) -> None:
        self._engine.dispose()


_CREATING = 0x5E55_4B52  # the advisory lock PostgreSQL keyrings take to create their tables


def _create_tables(conn: Connection) -> None:
    """The keyring's tables, made if absent, by one process at a time
    (PostgreSQL's IF NOT EXISTS alone is not safe)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CREATING})
    for table in _metadata.sorted_tables:
        conn.execute(CreateTable(table, if_not_exists=True))
        for index in table.indexes:
            conn.execute(CreateIndex(index, if_not_exists=True))


def _sqlite_pragmas(dbapi_connection: Any, record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in (
        "PRAGMA journal_mode=DELETE",  # no write-ahead log keeping a destroyed key's page
        "PRAGMA secure_delete=ON",
        "PRAGMA synchronous=FULL",
        "PRAGMA busy_timeout=30000",
    ):
        cursor.execute(pragma)
    cursor.close()
