"""`open_store`: the backend a target string names, loaded only then."""

from __future__ import annotations

import os
from collections.abc import Coroutine, Generator
from types import TracebackType
from typing import Any

from sessionstore.errors import ConfigurationError, EncryptionKeyError
from sessionstore.store import SessionStore

__all__ = ["SQLITE_SUFFIXES", "is_sql_target", "open_store"]

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")  # paths naming a SQLite database


def is_sql_target(target: str) -> bool:
    if "://" in target:
        return target.split("://", 1)[0].split("+", 1)[0] in ("sqlite", "postgresql")
    return target.endswith(SQLITE_SUFFIXES)


async def _make_store(target: str | os.PathLike[str], options: dict[str, Any]) -> SessionStore:
    text = os.fspath(target)
    if not text.strip():
        raise ConfigurationError(
            f"{text!r} names no store: give a directory, a database or memory://"
        )
    if "\x00" in text:
        raise ConfigurationError(f"{text!r}: a store target cannot hold a NUL character")
    try:
        return await _backend_for(text, options)
    except TypeError as exc:  # an option the backend does not take
        raise ConfigurationError(f"{text!r}: {exc}") from None


async def _backend_for(text: str, options: dict[str, Any]) -> SessionStore:
    if is_sql_target(text):
        from sessionstore.backends.sql import SqlStore  # SQLAlchemy loads only now

        return await SqlStore.open(text, **options)
    if options.get("keys") is not None or options.get("keyring") is not None:
        raise EncryptionKeyError(
            f"{text!r}: encryption at rest is for SQL stores (SQLite, PostgreSQL). A JSONL "
            "directory holds the plain files the Rust implementation reads; memory:// keeps "
            "nothing on disk to protect. Open a .db (or sqlite:///) target with keys="
        )
    options = {name: value for name, value in options.items() if name not in ("keys", "keyring")}
    if text == "memory://":
        from sessionstore.backends.memory import MemoryStore  # loaded on first use

        if options:
            raise ConfigurationError(f"memory:// takes no options, got {sorted(options)}")
        return MemoryStore()
    path = text
    if text.startswith("jsonl://"):
        path = text[len("jsonl://") :]
        if not path.startswith("/"):
            raise ConfigurationError(
                f"{text!r}: a jsonl:// target needs an absolute path (jsonl:///abs/dir)"
            )
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ConfigurationError(
            f"{text!r}: unknown store scheme {scheme!r} (use memory://, jsonl:///dir, "
            "sqlite:///file.db or a path)"
        )
    from sessionstore.backends.jsonl import JsonlStore  # loads only now

    return JsonlStore(path, **options)


class _Opening(Coroutine[Any, Any, SessionStore]):
    """What `open_store` returns: awaitable, an async context manager, and a
    coroutine (for ``asyncio.run``...) opening the store when first run."""

    def __init__(self, target: str | os.PathLike[str], options: dict[str, Any]) -> None:
        self._target = target
        self._options = options
        self._store: SessionStore | None = None
        self._running: Coroutine[Any, Any, SessionStore] | None = None

    async def _open(self) -> SessionStore:
        return await _make_store(self._target, self._options)

    def __await__(self) -> Generator[Any, None, SessionStore]:
        return self._open().__await__()

    def _coroutine(self) -> Coroutine[Any, Any, SessionStore]:
        if self._running is None:
            self._running = self._open()
        return self._running

    def send(self, value: Any) -> Any:
        return self._coroutine().send(value)

    def throw(self, *args: Any) -> Any:
        return self._coroutine().throw(*args)

    def close(self) -> None:
        if self._running is not None:
            self._running.close()

    async def __aenter__(self) -> SessionStore:
        self._store = await self._open()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.close()


def open_store(target: str | os.PathLike[str], **options: Any) -> _Opening:
    """Open the store a target names.

    Targets:

    * ``"memory://"``: a new, empty `MemoryStore`.
    * ``"jsonl:///abs/dir"`` or a directory path: a `JsonlStore` there.
    * ``"sqlite:///path.db"``, ``"sqlite+aiosqlite:///path.db"``, or a path
      ending in ``.db``, ``.sqlite`` or ``.sqlite3``: a `SqlStore` on SQLite.

    Options (``durability="full"``...) go to the backend's constructor.
    ``keys=`` (and ``keyring=``) seal a SQL store: encryption at rest
    (docs/encryption.md); other backends refuse them.
    Use it either way::

        store = await open_store("./sessions")
        async with open_store("memory://") as store:
            ...

    Raises:
        ConfigurationError: the target names no known backend, or an option
            is not valid for it.
    """
    return _Opening(target, options)
