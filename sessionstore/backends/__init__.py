"""The storage backends, and `open_store` to pick one from a target string.

`SqlStore` is loaded on first use, with SQLAlchemy: importing this package
(or `sessionstore`) costs nothing for a JSONL or memory store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessionstore.backends.base import JournalBase, StoreBase
from sessionstore.backends.jsonl import FileJournal, JsonlStore
from sessionstore.backends.memory import MemoryStore
from sessionstore.backends.targets import open_store

if TYPE_CHECKING:
    from sessionstore.backends.sql import SqlStore

__all__ = [
    "FileJournal",
    "JournalBase",
    "JsonlStore",
    "MemoryStore",
    "SqlStore",
    "StoreBase",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "SqlStore":
        from sessionstore.backends.sql import SqlStore

        return SqlStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
