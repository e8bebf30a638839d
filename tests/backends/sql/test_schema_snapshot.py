"""The schema snapshots a new database is made from are what the migrations make now.

A migration added without writing the snapshots again fails here, naming
the script that writes them; tests/test_migrations.py and
tests/backends/sql/test_postgres.py compare a store made from them with a
migrated database.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from sessionstore import SchemaError, open_store
from sessionstore.backends.sql import schema
from sessionstore.backends.sql.schema import SNAPSHOTS, snapshot


def shipped(dialect: str) -> str:
    return resources.files("sessionstore.migrations").joinpath(SNAPSHOTS[dialect]).read_text()


def test_the_sqlite_snapshot_is_what_the_migrations_make() -> None:
    engine = create_engine("sqlite://", poolclass=StaticPool)
    try:
        with engine.begin() as connection:
            made = snapshot(connection)
    finally:
        engine.dispose()
    assert made == shipped("sqlite"), "write it again: .venv/bin/python scripts/schema_snapshot.py"


def test_the_postgresql_snapshot_is_what_the_migrations_make(
    pg_schemas: Callable[[], str],
) -> None:
    engine = create_engine(pg_schemas())  # a new schema, first on the search path
    try:
        with engine.begin() as connection:
            made = snapshot(connection)
    finally:
        engine.dispose()
    assert made == shipped("postgresql"), (
        "write it again: SESSIONSTORE_PG_URL=... .venv/bin/python scripts/schema_snapshot.py"
    )


async def test_a_snapshot_of_another_revision_is_refused_naming_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped_revision = schema.REVISION
    monkeypatch.setattr(schema, "REVISION", "0099")  # as if a migration were added since
    refused = f"revision {shipped_revision!r}, not '0099'.*schema_snapshot.py"
    with pytest.raises(SchemaError, match=refused):
        await open_store(f"{tmp_path}/new.db")
