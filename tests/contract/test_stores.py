"""The contract suite, run on every backend we ship."""

import pytest

from sessionstore.testing import Backend, SessionStoreContract
from tests.kinds import SEALED_KINDS, STORE_KINDS, StoreTargets


@pytest.fixture(params=[*STORE_KINDS, *SEALED_KINDS])
def backend(request: pytest.FixtureRequest, store_targets: StoreTargets) -> Backend:
    return store_targets.backend(request.param)


class TestStores(SessionStoreContract):
    pass
