"""The SQL backend: `SqlStore` on SQLAlchemy async (SQLite in WAL mode)."""

from sessionstore.backends.sql.store import SqlStore

__all__ = ["SqlStore"]
