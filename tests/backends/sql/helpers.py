"""What the SQL store's tests share: the bytes SQLite keeps for a database,
and a connection to PostgreSQL as any tool could open."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    import psycopg


def stored_bytes(db: Path) -> bytes:
    """Everything SQLite keeps for ``db``: the file, its WAL and its index."""
    parts = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    return b"".join(part.read_bytes() for part in parts if part.exists())


def connect(url: str) -> psycopg.Connection:
    """A plain psycopg connection to the test's schema, as any tool could open."""
    import psycopg

    return psycopg.connect(
        make_url(url).set(drivername="postgresql").render_as_string(hide_password=False),
        autocommit=True,
    )
