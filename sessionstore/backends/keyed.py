"""What every journal backend shares for its keyed lines (docs/journal.md):
a line whose top-level ``"key"`` is a string (`sessionstore.wire.line_key`)
is indexed under that key."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

from sessionstore.backends.checks import check_limit, check_text
from sessionstore.backends.records import erasure_of
from sessionstore.errors import ConfigurationError
from sessionstore.models import Erasure
from sessionstore.wire import line_key

__all__ = [
    "Keyed",
    "Scanned",
    "bound",
    "check_keys",
    "check_scan",
    "dropped",
    "gathered",
    "scanned",
]

Keyed = dict[str, builtins.list[bytes]]
"""The lines under each key, oldest first; a key with no line is absent."""

Scanned = builtins.list[tuple[str, builtins.list[bytes]]]
"""Keys in descending order, each with its lines oldest first."""


def check_keys(keys: Iterable[object], what: str = "key") -> builtins.list[str]:
    """The keys asked for, each once, in order (each a string UTF-8 can carry)."""
    if isinstance(keys, str | bytes):
        raise ConfigurationError(f"keys must be a sequence of strings, not a single {keys!r}")
    checked: builtins.list[str] = []
    for key in keys:
        if not isinstance(key, str):
            raise ConfigurationError(f"a {what} must be a string, not {key!r}")
        check_text(key, what)
        checked.append(key)
    return builtins.list(dict.fromkeys(checked))


def check_scan(prefix: object, before: object, limit: object) -> None:
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a string, not {prefix!r}")
    check_text(prefix, "prefix")
    if before is not None:
        if not isinstance(before, str):
            raise ConfigurationError(f"before must be a string or None, not {before!r}")
        check_text(before, "before")
    check_limit(limit, allow_none=True)


def bound(prefix: str, before: str | None) -> str | None:
    """The least string above every key `scan` takes (None: no bound): the
    lesser of ``before`` and the first string past those starting with
    ``prefix`` (its last character below U+10FFFF made the next, skipping
    the surrogates, which no storage holds)."""
    stem = prefix.rstrip("\U0010ffff")
    past = None
    if stem:
        following = ord(stem[-1]) + 1
        past = stem[:-1] + chr(0xE000 if 0xD800 <= following <= 0xDFFF else following)
    if before is None or (past is not None and past < before):
        return past
    return before


def gathered(lines: Iterable[bytes], keys: Sequence[str] | None = None) -> Keyed:
    """The lines under each of ``keys`` (None: every key), oldest first."""
    wanted = None if keys is None else set(keys)
    found: Keyed = {}
    for line in lines:
        key = line_key(line)
        if key is not None and (wanted is None or key in wanted):
            found.setdefault(key, []).append(bytes(line))
    return found


def scanned(found: Keyed, prefix: str, before: str | None, limit: int | None) -> Scanned:
    keys = sorted(
        (key for key in found if key.startswith(prefix) and (before is None or key < before)),
        reverse=True,
    )
    return [(key, found[key]) for key in keys[:limit]]


def dropped(name: str, reason: str, lines: Sequence[bytes], keys: int) -> Erasure:
    """The record of dropping ``lines`` (under ``keys`` keys) from the journal ``name``."""
    record = erasure_of("journal", name, reason, (line + b"\n" for line in lines), len(lines))
    return record.model_copy(update={"keys": keys})
