"""The tables the queries name are the tables the migrations make.

The migrations are the schema's one definition; `tables` only names its
columns and their types for the queries. These tests migrate a database
with alembic and compare it with `tables.metadata`, table by table.
"""

from pathlib import Path

from sqlalchemy import Connection, create_engine, inspect

from sessionstore import migrate
from sessionstore.backends.sql.engine import open_sync_engine
from sessionstore.backends.sql.tables import metadata

Shape = tuple[list[tuple[str, str]], list[str]]
"""A table's columns (name, type as the dialect spells it) and primary key."""

ELSEWHERE = {
    "sqlite": {"search_vectors"},
    "postgresql": {"erasing", "erasures_spent", "spent_ticks", "search_mark", "search_postings"},
}
"""The tables of `metadata` that only the other database holds."""


def migrated(connection: Connection) -> dict[str, Shape]:
    """Every table of the migrated database but alembic's, with its shape."""
    inspector = inspect(connection)
    dialect = connection.dialect
    return {
        name: (
            [(c["name"], c["type"].compile(dialect)) for c in inspector.get_columns(name)],
            inspector.get_pk_constraint(name)["constrained_columns"],
        )
        for name in inspector.get_table_names()
        if name != migrate.VERSION_TABLE
    }


def named(connection: Connection) -> dict[str, Shape]:
    """Every table `metadata` names, with its shape on this database."""
    return {
        name: (
            [(c.name, c.type.compile(connection.dialect)) for c in table.c],
            [c.name for c in table.primary_key],
        )
        for name, table in metadata.tables.items()
    }


def assert_named_as_migrated(url: str) -> None:
    engine = open_sync_engine(url)
    try:
        with engine.connect() as connection:
            made, names = migrated(connection), named(connection)
    finally:
        engine.dispose()
    assert made == {name: names[name] for name in made}
    assert set(names) - set(made) == ELSEWHERE[engine.dialect.name]


async def test_the_tables_are_those_the_migrations_make_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "migrated.db"
    await migrate.upgrade(str(db))
    assert_named_as_migrated(f"sqlite:///{db}")


async def test_the_tables_are_those_the_migrations_make_on_postgresql(pg_url: str) -> None:
    await migrate.upgrade(pg_url)
    assert_named_as_migrated(pg_url)


def test_a_column_the_migrations_lack_is_found(tmp_path: Path) -> None:
    """The comparison sees a difference of one column."""
    engine = create_engine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE word_keys (bucket BIGINT PRIMARY KEY)")
            assert migrated(connection)["word_keys"] != named(connection)["word_keys"]
    finally:
        engine.dispose()
