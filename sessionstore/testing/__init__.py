"""The contract suites every backend must pass (docs/writing-a-backend.md).

Subclass `SessionStoreContract` in a test module and provide a ``backend``
fixture returning a `Backend`: it runs the tests of the core and of each
capability the store declares (`SessionStore.capabilities`), and checks that
the operations of each other capability raise `CapabilityError`. Journals
likewise: `SessionJournalContract` over a ``journal_backend`` fixture
returning a `JournalBackend`. The suites need pytest and pytest-asyncio
(the ``dev`` extra).
"""

from sessionstore.testing.common import JournalBackend
from sessionstore.testing.contract import Backend, SessionStoreContract
from sessionstore.testing.journal_contract import SessionJournalContract

__all__ = ["Backend", "JournalBackend", "SessionJournalContract", "SessionStoreContract"]
