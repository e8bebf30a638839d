"""Without its framework, an integration's tests skip locally and fail in CI."""

import pytest

from tests.integrations.frameworks import framework_missing


def test_a_missing_framework_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install -e '\.\[dev\]'"):
        framework_missing("openai-agents", ImportError("No module named 'agents'"))


def test_a_missing_framework_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but openai-agents"):
        framework_missing("openai-agents", ImportError("No module named 'agents'"))
