"""What the tests of encryption at rest share."""

import uuid

import pytest


@pytest.fixture
def marker() -> str:
    """A word found nowhere but where a test puts it."""
    return f"zq{uuid.uuid4().hex[:12]}"
