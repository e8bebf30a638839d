"""The contract is written once, in sessionstore/store.py, and read from every
store and journal: ``help()`` on a backend's, a view's or the blocking
facade's method gives the protocol's docstring, unless the class says what
it does differently."""

from __future__ import annotations

import inspect

import pytest

from sessionstore.backends import (
    FileJournal,
    JournalBase,
    JsonlStore,
    MemoryStore,
    SqlStore,
    StoreBase,
)
from sessionstore.backends.memory_journal import MemoryJournal
from sessionstore.backends.sql.journal import SqlJournal
from sessionstore.effects import EffectLog
from sessionstore.scoped import ScopedStore
from sessionstore.scoped_journal import ScopedJournal
from sessionstore.store import SessionJournal, SessionStore
from sessionstore.sync import SyncEffects, SyncJournal, SyncStore

IMPLEMENTATIONS = [
    (MemoryStore, SessionStore),
    (JsonlStore, SessionStore),
    (SqlStore, SessionStore),
    (ScopedStore, SessionStore),
    (MemoryJournal, SessionJournal),
    (FileJournal, SessionJournal),
    (SqlJournal, SessionJournal),
    (ScopedJournal, SessionJournal),
]


def _operations(protocol: type) -> list[str]:
    return sorted(name for name in dir(protocol) if not name.startswith("_"))


@pytest.mark.parametrize(
    ("implementation", "protocol"), IMPLEMENTATIONS, ids=lambda c: getattr(c, "__name__", "")
)
def test_each_operation_reads_the_protocol_s_docstring_or_the_class_s_own(
    implementation: type, protocol: type
) -> None:
    # A docstring of a base class (StoreBase's, to backend authors) is not
    # what a user of the store should read in its place.
    wrong = []
    for name in _operations(protocol):
        if name == "capabilities":  # a class attribute, as declared
            continue
        own = vars(implementation).get(name)
        doc = inspect.getdoc(getattr(implementation, name))
        if own is None or own.__doc__ is None:
            if doc != inspect.getdoc(getattr(protocol, name)):
                wrong.append(name)
        elif not doc:
            wrong.append(name)
    assert wrong == []


@pytest.mark.parametrize(
    ("base", "protocol"),
    [
        (StoreBase, SessionStore),
        (ScopedStore, SessionStore),
        (JournalBase, SessionJournal),
        (ScopedJournal, SessionJournal),
    ],
    ids=lambda c: getattr(c, "__name__", ""),
)
def test_no_operation_is_left_to_the_protocol_s_empty_body(base: type, protocol: type) -> None:
    # A class subclassing the protocol inherits its bodies (``...``, returning
    # None): each operation must be written by the class or a base of its own.
    protocols = set(protocol.__mro__)
    dunders = ["__aenter__", "__aexit__"] if protocol is SessionStore else []
    for name in [*_operations(protocol), *dunders]:
        owner = next(cls for cls in base.__mro__ if name in vars(cls))
        assert owner not in protocols, f"{base.__name__}.{name} is the protocol's stub"


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
