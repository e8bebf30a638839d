"""A backend with the core alone, written from docs/writing-a-backend.md: the
page's `DictStore` passes the core contract, its other capabilities raise
`CapabilityError`, and a class declaring a capability needs its hooks."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import pytest

from sessionstore import Capability, CapabilityError, SessionMeta
from sessionstore.backends import MemoryStore, StoreBase
from sessionstore.testing import Backend, SessionStoreContract

PAGE = Path(__file__).parents[2] / "docs" / "writing-a-backend.md"


def _page_backend() -> type[StoreBase]:
    """The `DictStore` of the page's first Python block, run as a module."""
    code = re.search(r"^```python\n(.*?)^```$", PAGE.read_text(), re.S | re.M)
    assert code is not None
    module = types.ModuleType("dict_store")
    exec(compile(code[1], str(PAGE), "exec"), module.__dict__)
    found: type[StoreBase] = module.DictStore
    return found


DictStore = _page_backend()


@pytest.fixture
def backend() -> Backend:
    async def open_store() -> Any:
        return DictStore()  # each a new, empty store, as for a memory store

    return Backend(open=open_store, persistent=False)


class TestDictStore(SessionStoreContract):
    pass


def test_the_page_backend_declares_only_the_core() -> None:
    assert DictStore().capabilities == frozenset()
    assert MemoryStore().capabilities == frozenset(Capability)


async def test_an_undeclared_capability_is_named_with_the_backend() -> None:
    async with DictStore() as store:
        session_id = await store.create(SessionMeta.new())
        with pytest.raises(CapabilityError) as raised:
            await store.fork(session_id)
    assert (
        str(raised.value)
        == "DictStore does not declare the capability 'branches', so it has no fork"
    )
    assert isinstance(raised.value, NotImplementedError)


def test_a_class_declaring_a_capability_without_its_hooks_is_refused() -> None:
    with pytest.raises(
        TypeError,
        match=r"Titled declares Capability\.TITLES without implementing"
        r" _set_title, _titles, _import_titles",
    ):

        class Titled(DictStore):  # type: ignore[valid-type,misc]
            capabilities = frozenset({Capability.TITLES})
