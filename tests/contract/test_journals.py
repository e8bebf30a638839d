"""The journal contract suite, run on every journal backend we ship."""

from collections.abc import AsyncIterator

import pytest

from sessionstore import SessionStore
from sessionstore.testing import JournalBackend, SessionJournalContract
from tests.kinds import JOURNAL_KINDS, SEALED_KINDS, StoreTargets


@pytest.fixture(params=[*JOURNAL_KINDS, *SEALED_KINDS])
async def journal_backend(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[JournalBackend]:
    stores: list[SessionStore] = []
    yield await store_targets.journal_backend(request.param, stores)
    for store in stores:
        await store.close()


class TestJournals(SessionJournalContract):
    pass
