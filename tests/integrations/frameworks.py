"""The gate of the integrations' tests: their framework, or a skip (a failure in CI)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def framework_missing(extra: str, error: ImportError) -> NoReturn:
    """Skip the calling test module, whose framework did not import; under
    CI=true, fail instead: CI installs ``.[dev]``, which holds every framework.

    Args:
        extra: the sessionstore extra that installs the framework.
        error: what the import raised.
    """
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"CI=true but {extra} does not import ({error}): the dev extra installs it",
            pytrace=False,
        )
    pytest.skip(
        f"{extra} is not installed: pip install -e '.[dev]' (or '.[{extra}]')",
        allow_module_level=True,
    )
