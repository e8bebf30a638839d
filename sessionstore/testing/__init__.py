"""The contract suite every `SessionStore` backend must pass.

For anyone who writes a backend: subclass `SessionStoreContract` in a test
module and provide a ``backend`` fixture returning a `Backend`::

    import pytest
    from sessionstore.testing import Backend, SessionStoreContract

    @pytest.fixture
    def backend(tmp_path):
        return Backend(open=lambda: MyStore.open(tmp_path / "db"))

    class TestMyStore(SessionStoreContract):
        pass

It needs pytest and pytest-asyncio (the ``dev`` extra).
"""

from sessionstore.testing.contract import Backend, SessionStoreContract

__all__ = ["Backend", "SessionStoreContract"]
