"""The storage backends, and `open_store` to pick one from a target string.

`SqlStore` is loaded on first use, with SQLAlchemy: importing this package
(or `sessionstore`) costs nothing for a JSONL or memory store. `JsonlStore`,
`FileJournal` and `MemoryStore` load on first use too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sessionstore.backends.base import JournalBase, StoreBase
from sessionstore.backends.targets import open_store

if TYPE_CHECKING:
    from sessionstore.backends.jsonl import FileJournal, JsonlStore
    from sessionstore.backends.memory import MemoryStore
    from sessionstore.backends.sql import SqlStore

_LAZY = {
    "FileJournal": "sessionstore.backends.jsonl",
    "JsonlStore": "sessionstore.backends.jsonl",
    "MemoryStore": "sessionstore.backends.memory",
    "SqlStore": "sessionstore.backends.sql",
}
"""Names loaded on first use, and their modules."""

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
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
