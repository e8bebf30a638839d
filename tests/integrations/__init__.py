"""Tests of the framework adapters (`sessionstore.integrations`), each against
the real framework, installed by the ``dev`` extra.

A test module calls `require` before importing its framework: without the
framework its tests are skipped, saying which extra brings it, and with
``CI=true`` they fail instead, as the PostgreSQL tests do (``.ci/run``
installs ``.[dev]``, so a missing framework there is a broken extra).
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.sync import SyncStore
from tests.kinds import STORE_KINDS

KINDS = STORE_KINDS
"""The store kinds the adapters are tested on: every one."""


def require(module: str, extra: str) -> None:
    """Import ``module``, or skip the calling test module (fail it under CI=true)."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        why = f"{module} is not installed ({exc}): pip install -e '.[{extra}]'"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {why}; the dev extra must bring it", pytrace=False)
        pytest.skip(why, allow_module_level=True)


async def call(store: SessionStore | SyncStore, method: str, *args: Any) -> Any:
    """``store.<method>(*args)``, awaited when the store is async: one test
    body for both kinds of store."""
    result = getattr(store, method)(*args)
    return await result if inspect.isawaitable(result) else result
