"""The contract is written once, in sessionstore/store.py, and read from every
store: ``help()`` on a backend's, a view's or the blocking facade's method
gives the protocol's docstring, unless the class says what it does
differently."""

from __future__ import annotations

import inspect

import pytest

from sessionstore.backends import JsonlStore, MemoryStore, SqlStore, StoreBase
from sessionstore.effects import EffectLog
from sessionstore.scoped import ScopedStore
from sessionstore.store import SessionJournal, SessionStore
from sessionstore.sync import SyncEffects, SyncJournal, SyncStore

OPERATIONS = sorted(name for name in dir(SessionStore) if not name.startswith("_"))
STORES = [MemoryStore, JsonlStore, SqlStore, ScopedStore]


def _protocol_doc(name: str) -> str:
    doc = inspect.getdoc(getattr(SessionStore, name))
    assert doc, f"SessionStore.{name} has no docstring"
    return doc


@pytest.mark.parametrize("store", STORES, ids=lambda store: store.__name__)
def test_each_operation_of_a_store_reads_the_protocol_s_docstring_or_its_own(
    store: type[SessionStore],
) -> None:
    # A docstring of a base class (StoreBase's, to backend authors) is not
    # what a user of the store should read in its place.
    wrong = []
    for name in OPERATIONS:
        own = vars(store).get(name)
        doc = inspect.getdoc(getattr(store, name))
        if own is None or isinstance(own, property) or own.__doc__ is None:
            if doc != _protocol_doc(name):
                wrong.append(name)
        elif not doc:
            wrong.append(name)
    assert wrong == []


@pytest.mark.parametrize("store", [StoreBase, ScopedStore], ids=lambda store: store.__name__)
def test_no_operation_is_left_to_the_protocol_s_empty_body(store: type) -> None:
    # A class subclassing the protocol inherits its bodies (``...``, returning
    # None): each operation must be written by the class or a base of its own.
    protocols = set(SessionStore.__mro__)
    for name in [*OPERATIONS, "__aenter__", "__aexit__"]:
        owner = next(cls for cls in store.__mro__ if name in vars(cls))
        assert owner not in protocols, f"{store.__name__}.{name} is the protocol's stub"


@pytest.mark.parametrize(
    ("facade", "protocol"),
    [(SyncStore, SessionStore), (SyncJournal, SessionJournal), (SyncEffects, EffectLog)],
    ids=["store", "journal", "effects"],
)
def test_a_forwarded_method_of_the_blocking_facade_says_so_over_the_async_docstring(
    facade: type, protocol: type
) -> None:
    forwarded = [
        name for name, value in vars(facade).items() if type(value).__name__ == "_Forwarded"
    ]
    assert forwarded
    for name in forwarded:
        method = getattr(protocol, name)
        doc = inspect.getdoc(getattr(facade, name))
        assert doc is not None
        first, _, rest = doc.partition("\n\n")
        assert first in (
            f"Blocking form of `{method.__qualname__}`.",
            f"Generator form of `{method.__qualname__}`.",
        ), name
        assert rest == inspect.getdoc(method), name


def test_a_facade_method_taken_from_a_store_object_keeps_the_docstring() -> None:
    store = SyncStore.wrap(_memory())
    try:
        assert inspect.getdoc(store.fork) == inspect.getdoc(SyncStore.fork)
        assert "Branch a session" in (store.fork.__doc__ or "")
    finally:
        store.close()


async def _memory() -> SessionStore:
    return MemoryStore()
