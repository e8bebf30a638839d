"""The journal contract suite, run on every journal backend we ship."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import FileJournal, SessionStore, open_store
from sessionstore.store import SessionJournal
from sessionstore.testing import JournalBackend, SessionJournalContract

JOURNAL_BACKENDS = ["file", "memory-store", "jsonl-store", "sqlite-store", "postgresql-store"]


async def open_journal_backend(
    kind: str, tmp_path: Path, stores: list[SessionStore], pg_url: str | None = None
) -> JournalBackend:
    """A journal backend of ``kind``; the stores it opens are added to ``stores``."""
    if kind == "file":

        async def open_file() -> SessionJournal:
            return FileJournal.in_dir(tmp_path / "agent")

        return JournalBackend(open=open_file)
    if kind == "memory-store":
        memory = await open_store("memory://")
        stores.append(memory)

        async def open_memory() -> SessionJournal:
            return memory.journal("agent-1")

        return JournalBackend(open=open_memory)
    targets = {"jsonl-store": str(tmp_path / "sessions"), "sqlite-store": str(tmp_path / "s.db")}
    target = targets.get(kind) or pg_url
    assert target is not None, f"{kind} needs a PostgreSQL URL"

    async def open_persistent() -> SessionJournal:
        store = await open_store(target)
        stores.append(store)
        return store.journal("agent-1")

    return JournalBackend(open=open_persistent)


@pytest.fixture(params=JOURNAL_BACKENDS)
async def journal_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[JournalBackend]:
    stores: list[SessionStore] = []
    pg_url = request.getfixturevalue("pg_url") if request.param == "postgresql-store" else None
    yield await open_journal_backend(request.param, tmp_path, stores, pg_url)
    for store in stores:
        await store.close()


class TestJournals(SessionJournalContract):
    pass
