"""The exception tree and the session-id rule (SPEC section 3)."""

import pytest

import sessionstore
from sessionstore import InvalidSessionIdError, SessionStoreError, validate_session_id
from sessionstore.errors import (
    CorruptSessionError,
    SessionNotFoundError,
    StreamingMessageError,
)


@pytest.mark.parametrize(
    "session_id",
    ["3425d7c5-0000-4000-8000-000000000000", "tenant:42", "Ünïcode", "a" * 200, "é" * 100, "a.b"],
)
def test_valid_ids_pass_unchanged(session_id: str) -> None:
    assert validate_session_id(session_id) == session_id


@pytest.mark.parametrize(
    ("session_id", "reason"),
    [
        ("../x", "starts with '.'"),
        ("a/b", "forbidden character '/'"),
        ("a\\b", "forbidden character"),
        (".hidden", "starts with '.'"),
        ("", "empty"),
        ("a" * 201, "201 UTF-8 bytes"),
        ("é" * 101, "202 UTF-8 bytes"),
        ("a\x00b", "forbidden character"),
        ("tab\there", "forbidden character"),
        ("new\nline", "forbidden character"),
        ("del\x7f", "forbidden character"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_invalid_ids_are_refused_with_the_reason(session_id: str, reason: str) -> None:
    with pytest.raises(InvalidSessionIdError, match=reason) as caught:
        validate_session_id(session_id)
    assert caught.value.session_id == session_id
    assert isinstance(caught.value, ValueError)


def test_non_string_id_is_refused() -> None:
    with pytest.raises(InvalidSessionIdError, match="not a string"):
        validate_session_id(42)  # type: ignore[arg-type]


def test_every_public_error_derives_from_the_one_base() -> None:
    errors = [
        getattr(sessionstore, name)
        for name in sessionstore.__all__
        if name.endswith("Error") and name != "SessionStoreError"
    ]
    assert len(errors) >= 7
    for error in errors:
        assert issubclass(error, SessionStoreError), error


def test_errors_name_the_session_and_where() -> None:
    error = CorruptSessionError("s1", "invalid JSON", path="/d/s1.jsonl", line=3)
    assert str(error) == "session 's1', /d/s1.jsonl line 3: invalid JSON"
    assert str(SessionNotFoundError("s1")) == "session not found: 's1'"
    assert isinstance(SessionNotFoundError("s1"), LookupError)
    assert "'s1'" in str(StreamingMessageError("s1", "e1"))
