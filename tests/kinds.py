"""The backends the tests run on, named once.

Every test that runs on several backends takes its kinds from here, so a new
backend joins them all by one line. A kind is a name; `StoreTargets` turns it
into fresh storage (the ``store_targets`` fixture of ``tests/conftest.py``
gives one per test, PostgreSQL included).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from contextlib import closing
from functools import partial
from pathlib import Path

from sqlalchemy.engine import make_url

from sessionstore import FileJournal, SessionStore, open_store
from sessionstore.store import SessionJournal
from sessionstore.testing import Backend, JournalBackend

STORE_KINDS = ("memory", "jsonl", "sqlite", "postgresql")
"""Every store backend we ship."""

PERSISTENT_KINDS = tuple(kind for kind in STORE_KINDS if kind != "memory")
"""The store kinds whose storage outlives a store object: stores opened on one
target, one after another or side by side (or in another process), share it."""

SEALED_KINDS = ("sqlite-sealed", "postgresql-sealed")
"""The SQL stores sealed by encryption at rest (docs/encryption.md): opened
with `TEST_KEYS`, their keyring a file beside their storage."""

TEST_KEYS = ["dGVzdC1rZXktb2Ytc2Vzc2lvbnN0b3JlLXRlc3RzISE="]
"""The master key of `SEALED_KINDS` (32 bytes, as `generate_key` writes one)."""

JOURNAL_KINDS = ("file", *STORE_KINDS)
"""Every journal backend: a `FileJournal`, or a journal kept in a store of
each kind (a sealed store's journals run the journal contract too:
tests/contract/test_journals.py)."""

PERSISTENT_JOURNAL_KINDS = tuple(kind for kind in JOURNAL_KINDS if kind != "memory")
"""The journal kinds that outlive their process: a file, or a persistent store's."""


class StoreTargets:
    """Fresh storage of any kind, as `open_store` targets.

    Args:
        root: where file-based storage goes.
        new_schema: makes a PostgreSQL target in a schema of its own (the
            ``pg_schemas`` fixture); asked only for a PostgreSQL kind.
    """

    def __init__(self, root: Path, new_schema: Callable[[], str] | None = None) -> None:
        self._root = root
        self._new_schema = new_schema
        self._made = itertools.count(1)

    def directory(self, name: str) -> Path:
        """A new directory path (not yet made), for storage beside the stores'."""
        return self._root / f"{name}-{next(self._made)}"

    def new(self, kind: str) -> str:
        """A target naming new, empty storage of ``kind`` (a store kind, or
        a sealed kind: the storage of its SQL kind)."""
        kind = kind.removesuffix("-sealed")
        if kind == "memory":
            return "memory://"  # each open makes a new, empty store
        if kind == "postgresql":
            if self._new_schema is None:
                raise ValueError("PostgreSQL targets need new_schema")
            return self._new_schema()
        if kind == "jsonl":
            return str(self.directory("jsonl"))
        if kind == "sqlite":
            where = self.directory("sqlite")
            where.mkdir(parents=True)
            return f"sqlite:///{where / 'sessions.db'}"
        raise ValueError(f"unknown store kind {kind!r}; the kinds are {STORE_KINDS}")

    def options(self, kind: str) -> dict[str, object]:
        """What `open_store` takes besides the target for ``kind``: a sealed
        kind's keys, and its keyring (a file of its own)."""
        if kind not in SEALED_KINDS:
            return {}
        keyring = self.directory("keyring")
        keyring.mkdir(parents=True)
        return {"keys": TEST_KEYS, "keyring": str(keyring / "store.keys")}

    def backend(self, kind: str) -> Backend:
        """The contract suite's `Backend` on new storage of ``kind``."""
        target, options = self.new(kind), self.options(kind)

        async def open_target() -> SessionStore:
            return await open_store(target, **options)

        plain = kind.removesuffix("-sealed")
        damage = None if kind == "memory" else partial(damage_session, plain, target)
        persistent = plain in PERSISTENT_KINDS
        return Backend(open=open_target, persistent=persistent, damage=damage)

    async def journal_backend(self, kind: str, stores: list[SessionStore]) -> JournalBackend:
        """The journal contract's `JournalBackend` on a new journal of ``kind``
        (a journal kind); the stores it opens are added to ``stores``, to close."""
        if kind == "file":
            where = self.directory("agent")

            async def open_file() -> SessionJournal:
                return FileJournal.in_dir(where)

            return JournalBackend(open=open_file)
        target, options = self.new(kind), self.options(kind)
        if kind not in PERSISTENT_KINDS and kind not in SEALED_KINDS:  # one store for all
            only = await open_store(target)
            stores.append(only)

            async def open_in_only() -> SessionJournal:
                return only.journal("agent-1")

            return JournalBackend(open=open_in_only)

        async def open_in_new() -> SessionJournal:
            store = await open_store(target, **options)
            stores.append(store)
            return store.journal("agent-1")

        return JournalBackend(open=open_in_new)


async def damage_session(kind: str, target: str, session_id: str) -> None:
    """Make a stored session undecodable behind the store's back, as only a
    test may: a garbage line in a JSONL file, a header row changed behind
    the append-only triggers on SQL."""
    if kind == "jsonl":
        with (Path(target) / f"{session_id}.jsonl").open("ab") as file:
            file.write(b"not json\n")
        return
    if kind == "sqlite":
        database = make_url(target).database
        assert database is not None
        with closing(sqlite3.connect(database, isolation_level=None)) as connection:
            connection.execute("DROP TRIGGER IF EXISTS sessions_no_update")
            connection.execute("UPDATE sessions SET header = 'not json' WHERE id = ?", [session_id])
        return
    import psycopg

    conninfo = make_url(target).set(drivername="postgresql")
    with psycopg.connect(conninfo.render_as_string(hide_password=False)) as connection:
        connection.execute("ALTER TABLE sessions DISABLE TRIGGER sessions_no_update")
        connection.execute("UPDATE sessions SET header = 'not json' WHERE id = %s", [session_id])
