"""Master keys: what a user gives as ``keys=``, and how a key is written down.

A master key is 32 random bytes (`generate_key` gives one, written as 44
characters of URL-safe base64, the form a key file or an environment
variable holds). ``keys=`` takes one key or a list: the first wraps every
new data key, and any of them unwraps, so a store moves to a new key by
putting it first and running `rotate`, then dropping the old one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeAlias

from sessionstore.errors import ConfigurationError

__all__ = [
    "KEY_BYTES",
    "Key",
    "MasterKeys",
    "fingerprint",
    "generate_key",
    "new_key",
    "read_key_file",
]

KEY_BYTES = 32
"""A key's length: AES-256."""

Key: TypeAlias = "bytes | str"
"""A master key: its 32 bytes, or their URL-safe base64 (as `generate_key` writes)."""


def new_key() -> bytes:
    """A new random key (a data key, or a master key's bytes)."""
    return os.urandom(KEY_BYTES)


def fingerprint(key: bytes) -> str:
    """A master key's public name (16 hex digits): which key wrapped a data
    key, without revealing the key."""
    return hmac.digest(key, b"sessionstore/fingerprint", hashlib.sha256)[:8].hex()


def generate_key() -> str:
    """A new random master key, as 44 characters of URL-safe base64.

    Keep it apart from the store and its keyring (a secret manager, a file
    only the agent's user reads): whoever holds it and the keyring reads
    every session.
    """
    return base64.urlsafe_b64encode(new_key()).decode()


def _key_bytes(key: object, number: int) -> bytes:
    what = f"key {number}" if number else "the key"
    if isinstance(key, str):
        try:
            raw = base64.urlsafe_b64decode(key.strip().encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise ConfigurationError(
                f"{what} is not URL-safe base64 (a key from sessionstore.generate_key())"
            ) from None
    elif isinstance(key, bytes | bytearray):
        raw = bytes(key)
    else:
        raise ConfigurationError(
            f"{what} is a {type(key).__name__}: give the key's 32 bytes or its base64 text"
        )
    if len(raw) != KEY_BYTES:
        raise ConfigurationError(f"{what} holds {len(raw)} bytes, not {KEY_BYTES}")
    return raw


class MasterKeys:
    """The master keys a store was opened with: the first wraps, all unwrap.

    Holds the keys' bytes and never shows them: its ``repr`` names their
    fingerprints only.
    """

    def __init__(self, keys: Key | Iterable[Key]) -> None:
        if isinstance(keys, str | bytes | bytearray):
            given: list[object] = [keys]
        elif isinstance(keys, Iterable):
            given = list(keys)
        else:
            given = [keys]  # refused below, by its type
        if not given:
            raise ConfigurationError("keys= holds no key: give one, or a list, the newest first")
        raws = [_key_bytes(key, n if len(given) > 1 else 0) for n, key in enumerate(given, 1)]
        self._by_print = {fingerprint(raw): raw for raw in reversed(raws)}
        self.first = fingerprint(raws[0])
        """The fingerprint of the key that wraps new data keys."""

    def __repr__(self) -> str:
        return f"MasterKeys({', '.join(self._by_print)})"

    @property
    def fingerprints(self) -> list[str]:
        """Every key's fingerprint."""
        return list(self._by_print)

    def key(self, fingerprint: str) -> bytes | None:
        """The key of that fingerprint, if given."""
        return self._by_print.get(fingerprint)

    def wrapping(self) -> bytes:
        """The key that wraps new data keys (the first given)."""
        return self._by_print[self.first]


def read_key_file(path: str | os.PathLike[str]) -> list[str]:
    """The keys of a key file: one per line, the newest first; blank lines
    and lines starting with ``#`` are skipped.

    Raises:
        ConfigurationError: the file cannot be read, or holds no key.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"key file {os.fspath(path)!r} cannot be read: {exc}") from None
    keys = [line.strip() for line in text.splitlines()]
    keys = [key for key in keys if key and not key.startswith("#")]
    if not keys:
        raise ConfigurationError(f"key file {os.fspath(path)!r} holds no key")
    return keys
