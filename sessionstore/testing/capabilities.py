"""Capabilities in the contract suite: a test of a capability (`needs`) runs
on a store that declares it and is skipped on one that does not, whose
operations of it must raise `CapabilityError` (`CapabilityContract`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from sessionstore import CapabilityError
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.common import message

__all__ = ["CALLS", "CapabilityContract", "needs"]

_F = TypeVar("_F", bound=Callable[..., Any])

CALLS: dict[Capability, dict[str, Callable[[SessionStore, str], Awaitable[object]]]] = {
    Capability.BRANCHES: {
        "fork": lambda store, session: store.fork(session),
        "set_head": lambda store, session: store.set_head("head", session),
        "head": lambda store, session: store.head("head"),
        "head_history": lambda store, session: store.head_history("head"),
        "heads": lambda store, session: store.heads(),
        "import_head": lambda store, session: store.import_head("head", []),
        "expect_head": lambda store, session: store.append(
            session, message("e1", "x"), expect_head="head"
        ),
        "load_slice's expect_head": lambda store, session: store.load_slice(
            session, 0, expect_head="head"
        ),
    },
    Capability.TITLES: {
        "set_title": lambda store, session: store.set_title(session, "a title"),
        "titles": lambda store, session: store.titles(session),
        "import_titles": lambda store, session: store.import_titles(session, []),
    },
    Capability.SUMMARIES: {"summaries": lambda store, session: store.summaries()},
    Capability.ERASURE: {
        "erase": lambda store, session: store.erase(session, reason="a test"),
        "erasures": lambda store, session: store.erasures(),
    },
}
"""A call of each operation of each capability, on a store and a session in it."""


def needs(*capabilities: Capability) -> Callable[[_F], _F]:
    """Mark a contract test, or each test of a contract class, as one of
    ``capabilities``: it runs on a store that declares them all, and is
    skipped, saying which it lacks, on another."""

    def mark(target: _F) -> _F:
        tests = (
            [
                test
                for name, test in vars(target).items()
                if name.startswith("test") and callable(test)
            ]
            if isinstance(target, type)
            else [target]
        )
        for test in tests:
            vars(test)["needs"] = frozenset(getattr(test, "needs", ())) | set(capabilities)
        return target

    return mark


class CapabilityContract:
    """The capabilities a store declares decide which tests run; those it
    does not declare raise `CapabilityError`."""

    @pytest.fixture(autouse=True)
    def _declared(self, request: pytest.FixtureRequest) -> None:
        needed: frozenset[Capability] = getattr(request.function, "needs", frozenset())
        if needed:
            store: SessionStore = request.getfixturevalue("store")
            lacking = needed - store.capabilities
            if lacking:
                names = ", ".join(sorted(capability.value for capability in lacking))
                pytest.skip(f"{type(store).__name__} does not declare {names}")

    async def test_operations_of_undeclared_capabilities_raise_capability_error(
        self, store: SessionStore, session: str
    ) -> None:
        for capability in set(Capability) - store.capabilities:
            for operation, call in CALLS[capability].items():
                with pytest.raises(CapabilityError) as raised:
                    await call(store, session)
                assert raised.value.backend == type(store).__name__, operation
                assert raised.value.capability is capability, operation
                assert type(store).__name__ in str(raised.value)
                assert repr(capability.value) in str(raised.value)
        assert await store.load(session) == []  # nothing was written

    async def test_declared_capabilities_are_capabilities(self, store: SessionStore) -> None:
        assert isinstance(store.capabilities, frozenset)
        assert all(isinstance(capability, Capability) for capability in store.capabilities)
        for capability in Capability:  # and the suite calls each operation of each
            assert set(capability.operations) <= set(CALLS[capability]), capability
