"""Without a PostgreSQL server, its tests skip locally and fail in CI."""

import pytest

from tests.conftest import PG_ENV, postgres_url_or_skip


def test_a_missing_server_skips_locally_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PG_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=PG_ENV):
        postgres_url_or_skip()


def test_a_missing_server_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PG_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        postgres_url_or_skip()


def test_a_configured_server_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PG_ENV, "postgresql://somewhere/db")
    assert postgres_url_or_skip() == "postgresql://somewhere/db"
