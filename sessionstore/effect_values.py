"""The values of effects (`sessionstore.effects`): the digest an intent
records of a call's arguments, the form a result is kept (and replayed) in,
and the text of what a line cannot hold."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel

from sessionstore.errors import InvalidRecordError
from sessionstore.models import Effect
from sessionstore.wire import MAX_DEPTH, decode_effect, encode, encode_value

__all__ = ["args_digest", "kept_json", "line_text"]


def line_text(value: Any) -> str:
    """``str(value)`` as a line can keep it: a lone surrogate as its escape, a
    value nested too deep to print as a note saying so."""
    try:
        text = str(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to print>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def kept_json(value: Any) -> Any:
    """A result as the log keeps it and a replay gives it back (`EffectLog.once`'s
    Returns). Never raises: the effect has already run."""
    try:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        line = encode(Effect(effect="done", key="", result=value, at=""))
        return decode_effect(line).result  # as a replay reads it
    except (InvalidRecordError, ValueError):  # pydantic: "serialization depth exceeded"
        return line_text(value)


def _canonical(value: Any, depth: int = 1) -> Any:
    """Arguments as JSON the same in every process: a set sorted, an integer
    beyond 64 bits and anything not JSON as text.

    Raises:
        InvalidRecordError: they nest deeper than the wire allows.
    """
    if isinstance(value, BaseModel):
        try:
            value = value.model_dump(mode="json")
        except ValueError:  # pydantic: "serialization depth exceeded"
            raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(value, dict | list | tuple | set | frozenset) and depth > MAX_DEPTH:
        raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        return {line_text(key): _canonical(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item, depth + 1) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_canonical(item, depth + 1) for item in value), key=encode_value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    return line_text(value)


def args_digest(args: Any) -> str:
    """The digest an intent records of a call's arguments: SHA-256 of their
    JSON, the same in every process.

    Raises:
        InvalidRecordError: they nest deeper than the wire allows.
    """
    canonical = _canonical(args)
    try:
        text = encode_value(canonical)
    except InvalidRecordError:  # a float NaN: its text
        text = line_text(args)
    return hashlib.sha256(text.encode()).hexdigest()
