"""Stores for the adapter tests: each kind of `tests.integrations.KINDS`, async or blocking."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sessionstore import SessionStore, open_store
from sessionstore.sync import SyncStore
from sessionstore.sync import open_store as open_sync_store
from tests.integrations import KINDS
from tests.kinds import StoreTargets


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def async_store(kind: str, store_targets: StoreTargets) -> AsyncIterator[SessionStore]:
    """A new, empty async store of ``kind``."""
    async with open_store(store_targets.new(kind)) as store:
        yield store


@pytest.fixture
def sync_store(kind: str, store_targets: StoreTargets) -> Iterator[SyncStore]:
    """A new, empty blocking store of ``kind``."""
    with open_sync_store(store_targets.new(kind)) as store:
        yield store
