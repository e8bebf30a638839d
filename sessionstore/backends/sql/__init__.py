"""The SQL backend: `SqlStore` on SQLAlchemy async (SQLite in WAL mode).

`SqlStore` is loaded on first use, so that importing one module of the
package (its tables, for the migrations) does not load the whole store first.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from sessionstore.backends.sql.store import SqlStore

__all__ = ["SqlStore"]


def __getattr__(name: str) -> typing.Any:
    if name != "SqlStore":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sessionstore.backends.sql.store import SqlStore

    return SqlStore
