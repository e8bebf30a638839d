"""The contract suites every backend must pass.

For anyone who writes a backend: subclass `SessionStoreContract` in a test
module and provide a ``backend`` fixture returning a `Backend`::

    import pytest
    from sessionstore.testing import Backend, SessionStoreContract

    @pytest.fixture
    def backend(tmp_path):
        return Backend(open=lambda: MyStore.open(tmp_path / "db"))

    class TestMyStore(SessionStoreContract):
        pass

It runs the tests of the core and of each capability the store declares
(`SessionStore.capabilities`); for each capability it does not declare, a
test checks that its operations raise `CapabilityError`.

Journals likewise: `SessionJournalContract` over a ``journal_backend``
fixture returning a `JournalBackend`.

The suites need pytest and pytest-asyncio (the ``dev`` extra).
"""

from sessionstore.testing.common import JournalBackend
from sessionstore.testing.contract import Backend, SessionStoreContract
from sessionstore.testing.journal_contract import SessionJournalContract

__all__ = ["Backend", "JournalBackend", "SessionJournalContract", "SessionStoreContract"]
