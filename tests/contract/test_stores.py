"""The contract suite, run on every backend we ship."""

from pathlib import Path

import pytest

from sessionstore import open_store
from sessionstore.store import SessionStore
from sessionstore.testing import Backend, SessionStoreContract


@pytest.fixture(params=["memory", "jsonl", "sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "memory":

        async def open_memory() -> SessionStore:
            return await open_store("memory://")

        return Backend(open=open_memory, persistent=False)

    if request.param == "jsonl":

        async def open_jsonl() -> SessionStore:
            return await open_store(tmp_path / "sessions")

        return Backend(open=open_jsonl)

    target = (
        request.getfixturevalue("pg_url")
        if request.param == "postgresql"
        else f"sqlite:///{tmp_path / 'sessions.db'}"
    )

    async def open_sql() -> SessionStore:
        return await open_store(target)

    return Backend(open=open_sql)


class TestStores(SessionStoreContract):
    pass
