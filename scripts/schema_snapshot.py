"""Write the schema snapshots a new database is made from (run after adding a migration).

    .venv/bin/python scripts/schema_snapshot.py            # SQLite
    SESSIONSTORE_PG_URL=... .venv/bin/python scripts/schema_snapshot.py   # and PostgreSQL

Each runs the migrations on an empty database (SQLite in memory; on
PostgreSQL a schema of its own, dropped after) and writes what they made to
``migrations/`` (`sessionstore.backends.sql.schema.SNAPSHOTS`). The tests
compare a store made from them with a migrated database, and these files
with what this script would write.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from sessionstore.backends.sql.schema import SNAPSHOTS, snapshot

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def sqlite_snapshot() -> str:
    """The SQLite snapshot, made in a private in-memory database."""
    engine = create_engine("sqlite://", poolclass=StaticPool)
    try:
        with engine.begin() as connection:
            return snapshot(connection)
    finally:
        engine.dispose()


def postgresql_snapshot(url: str) -> str:
    """The PostgreSQL snapshot, made in a new schema of the server at ``url``."""
    name = f"snapshot_{uuid.uuid4().hex}"
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(f'CREATE SCHEMA "{name}"')
            connection.exec_driver_sql(f'SET LOCAL search_path TO "{name}"')
            made = snapshot(connection)
            connection.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
            return made
    finally:
        engine.dispose()


def main() -> None:
    written = {"sqlite": sqlite_snapshot()}
    url = os.environ.get("SESSIONSTORE_PG_URL")
    if url:
        written["postgresql"] = postgresql_snapshot(url)
    for dialect, text in written.items():
        (MIGRATIONS / SNAPSHOTS[dialect]).write_text(text, encoding="utf-8")
        print(f"wrote migrations/{SNAPSHOTS[dialect]}")
    if not url:
        print("migrations/snapshot.postgresql.json not written: set SESSIONSTORE_PG_URL")


if __name__ == "__main__":
    main()
