"""Fixtures of the command line's tests."""

import asyncio
from pathlib import Path

import pytest

from sessionstore import open_store


@pytest.fixture(params=["jsonl", "sqlite"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store: a JSONL directory or a SQLite database."""
    target = str(tmp_path / ("sessions" if request.param == "jsonl" else "sessions.db"))

    async def make() -> None:
        async with await open_store(target):
            pass

    asyncio.run(make())
    return target
