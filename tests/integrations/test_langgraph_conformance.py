"""LangGraph's own conformance suite for checkpointers, unchanged, on `StoreSaver`.

``langgraph-checkpoint-conformance`` (a dev dependency, from PyPI) detects
which capabilities a saver implements and runs each one's tests: here every
capability must be detected and pass, on every store kind and a sealed one.
Run with ``-s`` to see its report.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.integrations import require

require("langgraph.checkpoint.conformance", "dev")

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from sessionstore import open_store
from sessionstore.integrations.langgraph import StoreSaver
from sessionstore.sync import open_store as open_sync_store
from tests.kinds import STORE_KINDS, StoreTargets

KINDS = (*STORE_KINDS, "sqlite-sealed")


@pytest.mark.parametrize("kind", KINDS)
async def test_every_capability_is_detected_and_passes(
    kind: str, store_targets: StoreTargets
) -> None:
    # One store per capability suite, as the suite makes one saver each.
    async def saver() -> AsyncIterator[BaseCheckpointSaver[int]]:
        async with open_store(store_targets.new(kind), **store_targets.options(kind)) as store:
            yield StoreSaver(store)

    registered = checkpointer_test(name=f"StoreSaver on {kind}")(saver)
    report = await validate(registered, progress=ProgressCallbacks.verbose())
    report.print_report()
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == {capability.value for capability in ALL_CAPABILITIES}
    failures = [f for result in report.results.values() for f in result.failures]
    assert report.passed_all(), failures


async def test_the_suite_passes_through_a_blocking_store(store_targets: StoreTargets) -> None:
    # Built on a SyncStore, the async methods run its calls in a worker thread.
    async def saver() -> AsyncIterator[BaseCheckpointSaver[int]]:
        store = open_sync_store(store_targets.new("sqlite"))
        try:
            yield StoreSaver(store)
        finally:
            store.close()

    report = await validate(checkpointer_test(name="StoreSaver on a SyncStore")(saver))
    report.print_report()
    failures = [f for result in report.results.values() for f in result.failures]
    assert report.passed_all(), failures
