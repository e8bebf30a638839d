"""Master keys: what a user gives as ``keys=`` (one key or a list, the newest
first), and how a key is written down: 44 characters of URL-safe base64.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat
from collections.abc import Iterable
from typing import TypeAlias

from sessionstore.errors import ConfigurationError, EncryptionKeyError

__all__ = [
    "KEY_BYTES",
    "KEY_FILE_BYTES",
    "Key",
    "MasterKeys",
    "fingerprint",
    "generate_key",
    "new_key",
    "parse_key",
    "read_key_file",
]

KEY_BYTES = 32  # AES-256
KEY_FILE_BYTES = 64 * 1024  # about a thousand keys with comments; more is no key file

Key: TypeAlias = "bytes | str"
"""A master key: its 32 bytes, or their URL-safe base64 (as `generate_key` writes)."""


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def fingerprint(key: bytes) -> str:
    """A master key's public name (16 hex digits), which reveals nothing of it."""
    return hmac.digest(key, b"sessionstore/fingerprint", hashlib.sha256)[:8].hex()


def generate_key() -> str:
    """A new random master key, as 44 characters of URL-safe base64.

    Keep it apart from the store and its keyring (a secret manager, a file
    only the agent's user reads): whoever holds it and the keyring reads
    every session.
    """
    return base64.urlsafe_b64encode(new_key()).decode()


_TEXT = 44  # characters of URL-safe base64 that write KEY_BYTES bytes: 43, then "="
_FORM = "a key is 44 characters of URL-safe base64, as `sessionstore keys generate` writes"
_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def parse_key(text: str, where: str = "the key") -> bytes:
    """The bytes of a master key written as `generate_key` writes it (43
    characters of URL-safe base64 then ``=``), whitespace around it ignored.

    Raises:
        EncryptionKeyError: the text is not such a key; the message names
            ``where`` it was and what is wrong, never the key.
    """
    key = text.strip()
    for number, char in enumerate(key, 1):
        if char in _ALPHABET or (char == "=" and number == len(key)):
            continue
        if char.isspace():
            wrong = "whitespace"
        elif char == "=":
            wrong = "padding (=) before the end"
        else:
            wrong = "not URL-safe base64 (A-Z, a-z, 0-9, - and _)"
        raise EncryptionKeyError(
            f"{where} is not a master key: its character {number} (of {len(key)}) is {wrong}; "
            f"{_FORM}"
        )
    if len(key) != _TEXT:
        raise EncryptionKeyError(
            f"{where} is not a master key: {len(key)} characters, not {_TEXT}; {_FORM}"
        )
    if not key.endswith("="):
        raise EncryptionKeyError(
            f"{where} is not a master key: it does not end with its padding (=); {_FORM}"
        )
    raw = base64.urlsafe_b64decode(key)
    if base64.urlsafe_b64encode(raw).decode("ascii") != key:  # the last character's spare bits
        raise EncryptionKeyError(
            f"{where} is not a master key: its character {_TEXT - 1} holds bits no key has; {_FORM}"
        )
    return raw


def _key_bytes(key: object, number: int) -> bytes:
    what = f"key {number}" if number else "the key"
    if isinstance(key, str):
        return parse_key(key, what)
    if isinstance(key, bytes | bytearray):
        raw = bytes(key)
    else:
        raise EncryptionKeyError(
            f"{what} is a {type(key).__name__}: give the key's 32 bytes or its base64 text"
        )
    if len(raw) != KEY_BYTES:
        raise EncryptionKeyError(f"{what} holds {len(raw)} bytes, not {KEY_BYTES}")
    return raw


class MasterKeys:
    """The master keys a store was opened with, the newest first: all unwrap;
    the first is the one a rotation makes current. Its ``repr`` names
    fingerprints only."""

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
        self.first = fingerprint(raws[0])  # the newest

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
        """The first key given: the one a rotation rewraps every data key under."""
        return self._by_print[self.first]


def read_key_file(path: str | os.PathLike[str]) -> list[str]:
    """The keys of a key file: one a line, the newest first, blank lines and
    ``#`` comments skipped, each checked as `parse_key` checks a key.

    Raises:
        ConfigurationError: the file cannot be read, is not a regular file,
            is larger than `KEY_FILE_BYTES`, or holds no key.
        EncryptionKeyError: a line is not a key (naming the file and line).
    """
    text = _key_file_text(path)
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        key = line.strip()
        if key and not key.startswith("#"):
            parse_key(key, f"line {number} of key file {os.fspath(path)!r}")
            keys.append(key)
    if not keys:
        raise ConfigurationError(f"key file {os.fspath(path)!r} holds no key")
    return keys


def _key_file_text(path: str | os.PathLike[str]) -> str:
    """A key file's text, read without waiting and without reading without end."""
    # Opened without blocking (a FIFO with no writer would hang a plain
    # open); a symlink to a regular file is fine, as a mounted secret often is.
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigurationError(f"key file {name!r} cannot be read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigurationError(
                f"key file {name!r} is not a regular file (a FIFO, a device or a "
                "directory): write the keys into a file (sessionstore keys generate --out FILE)"
            )
        data = b""
        while len(data) <= KEY_FILE_BYTES and (chunk := os.read(fd, KEY_FILE_BYTES + 1)):
            data += chunk
    except OSError as exc:
        raise ConfigurationError(f"key file {name!r} cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > KEY_FILE_BYTES:
        raise ConfigurationError(
            f"key file {name!r} is larger than {KEY_FILE_BYTES} bytes: not a key file"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(f"key file {name!r} is not UTF-8 text: not a key file") from None
