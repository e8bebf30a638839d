"""A backend with the core alone, written from docs/writing-a-backend.md: the
page's `DictStore` passes the core contract, its other capabilities raise
`CapabilityError`, a class declaring a capability needs its hooks, and the
page's tables of hooks and operations are those of `StoreBase` and `store.py`."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import pytest

from sessionstore import Capability, CapabilityError, SessionMeta
from sessionstore.backends import MemoryStore, StoreBase
from sessionstore.backends.base import CAPABILITY_HOOKS
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


def _table(after: str) -> list[list[str]]:
    """The body rows of the page's first table after the text ``after``, as cells."""
    lines = PAGE.read_text().split(after, 1)[1].splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:  # past the header and its rule
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_page_names_every_core_hook_and_no_other() -> None:
    named = {re.findall(r"^`(\w+)\(", hook)[0] for hook, _ in _table("write its core hooks")}
    assert named - {"close"} == StoreBase.__abstractmethods__  # close: only if it holds resources


def test_the_page_names_each_capability_s_operations_and_hooks() -> None:
    rows = {row[0]: row[1:] for row in _table("## Capabilities")}
    assert set(rows) == {f"`{capability}`" for capability in Capability}
    for capability in Capability:
        operations, hooks = rows[f"`{capability}`"]
        # The expect_head of append_many and load_slice: an argument of core operations.
        core = {"append_many", "load_slice", "expect_head"}
        named = set(re.findall(r"`(\w+)`", operations)) - core
        assert named == set(capability.operations), capability
        assert re.findall(r"`(\w+)\(", hooks) == list(CAPABILITY_HOOKS[capability]), capability
