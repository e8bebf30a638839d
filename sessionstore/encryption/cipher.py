"""The cipher: AES-256-GCM from the ``cryptography`` package, and keyed hashes.

A sealed value is ``version (1) | key id (12) | nonce (12) | ciphertext |
tag (16)``, its associated data binding it (version and key id too) to
where it belongs: moved, it no longer opens. docs/encryption.md describes
the scheme, word keys' tokens included.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KEY_ID_BYTES",
    "VERSION",
    "Sealed",
    "WordKey",
    "digest",
    "new_key_id",
    "nonce_key",
    "old_digest",
    "open_value",
    "seal",
    "seal_fixed",
    "sealed_key_id",
    "stored",
    "token",
    "unwrap",
    "wrap",
]

KEY_ID_BYTES = 12  # a data key's id: random, never reused in a keyring
VERSION = b"\x01"  # the first byte of every sealed value
_NONCE = 12  # random: a data key seals one session, far below 2**32 values
_HEAD = 1 + KEY_ID_BYTES  # version and key id, before the nonce
_LEAST = _HEAD + _NONCE + 16  # an empty value's tag


class Sealed(ValueError):
    """A value that does not open: not sealed by this scheme, sealed by
    another key, or moved or changed since (the store raises a `CorruptSessionError`)."""


def new_key_id() -> bytes:
    return os.urandom(KEY_ID_BYTES)


def _where(kind: str, name: str, position: int) -> bytes:
    return f"sessionstore\x00{kind}\x00{name}\x00{position}".encode()


def seal(cipher: AESGCM, key_id: bytes, kind: str, name: str, position: int, data: bytes) -> bytes:
    """``data`` sealed under the data key ``cipher`` (whose id is ``key_id``),
    bound to the record ``kind`` of ``name`` at ``position``."""
    return _sealed(cipher, VERSION + key_id, _where(kind, name, position), os.urandom(_NONCE), data)


def _sealed(cipher: AESGCM, head: bytes, where: bytes, nonce: bytes, data: bytes) -> bytes:
    return head + nonce + cipher.encrypt(nonce, data, head + where)


def seal_fixed(
    cipher: AESGCM,
    key_id: bytes,
    nonces: bytes,
    kind: str,
    name: str,
    position: int,
    data: bytes,
) -> bytes:
    """`seal`, deterministic: the nonce is a keyed hash (under ``nonces``) of
    where the value goes and of ``data``, as in SIV modes, so an archive
    exported again gives the same bytes; it reveals only equal data at equal places."""
    head = VERSION + key_id
    where = _where(kind, name, position)
    nonce = hmac.digest(nonces, head + where + b"\x00" + data, hashlib.sha256)[:_NONCE]
    return _sealed(cipher, head, where, nonce, data)


def nonce_key(data_key: bytes) -> bytes:
    """The key `seal_fixed` derives its nonces with, from a data key's bytes."""
    return hmac.digest(data_key, b"sessionstore/synthetic-nonce", hashlib.sha256)


def stored(value: bytes | bytearray | memoryview | str) -> bytes:
    """The bytes of a sealed value as a column keeps it (bytes, or base64); else `Sealed`."""
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value)
        if value[:1] == VERSION:
            return value
        value = value.decode("ascii", "replace")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Sealed("not a sealed value") from None


def sealed_key_id(value: bytes) -> bytes:
    """The id of the data key that sealed ``value``; `Sealed` when it is no sealed value."""
    if len(value) < _LEAST or value[:1] != VERSION:
        raise Sealed("not a value sealed by sessionstore's cipher (version 1)")
    return value[1:_HEAD]


def open_value(cipher: AESGCM, kind: str, name: str, position: int, value: bytes) -> bytes:
    """The data ``value`` seals, checked to belong to the record ``kind`` of
    ``name`` at ``position``; `Sealed` when it does not open so."""
    sealed_key_id(value)
    nonce = value[_HEAD : _HEAD + _NONCE]
    try:
        return cipher.decrypt(
            nonce, value[_HEAD + _NONCE :], value[:_HEAD] + _where(kind, name, position)
        )
    except InvalidTag:
        raise Sealed(
            "its authentication tag does not match: changed, moved from another record, "
            "or sealed under another key"
        ) from None


def wrap(master: bytes, key_id: bytes, data_key: bytes) -> bytes:
    """``data_key`` wrapped by the master key ``master``, bound to its id."""
    nonce = os.urandom(_NONCE)
    return nonce + AESGCM(master).encrypt(nonce, data_key, b"sessionstore/wrap\x00" + key_id)


def unwrap(master: bytes, key_id: bytes, wrapped: bytes) -> bytes:
    """The data key ``wrapped`` holds; `Sealed` unless ``master`` wrapped it as it is."""
    try:
        return AESGCM(master).decrypt(
            wrapped[:_NONCE], wrapped[_NONCE:], b"sessionstore/wrap\x00" + key_id
        )
    except (InvalidTag, ValueError):
        raise Sealed("the wrapped key does not open with this master key") from None


_DIGEST = 12  # bytes of a token's keyed hash
_PAD = bytes(16 - _DIGEST)  # what fills a word's block to AES's 16 bytes


def digest(key: bytes, kind: str, text: str) -> bytes:
    """The keyed hash of ``text`` (a word, an owner) that `token` encodes."""
    return hmac.digest(key, f"{kind}\x00{text}".encode(), hashlib.sha256)[:_DIGEST]


def token(key: bytes, kind: str, text: str) -> str:
    """A keyed hash of ``text`` (an owner, a key): equal texts give equal
    tokens under one key, and nothing else can be learnt without it."""
    return base64.b32encode(digest(key, kind, text)).decode().rstrip("=").lower()


_TOKEN_CHARS = 22  # a 16-byte block in unpadded base64


class WordKey:
    """A word key: it makes a word's keyed hash (`digest` under the index
    key) the token a word index holds, by enciphering it as one AES block,
    after its bucket (``<bucket>.``: an index sorted by token keeps each
    bucket's tokens together). Destroyed, its tokens are as good as random.

    Args:
        key_id: its id in the keyring.
        raw: its 32 bytes.
        bucket: the bucket of sessions whose tokens it makes.
    """

    def __init__(self, key_id: bytes, raw: bytes, bucket: int) -> None:
        self.key_id = key_id
        self.bucket = bucket
        self.prefix = f"{bucket}."
        self._cipher = Cipher(algorithms.AES(raw), modes.ECB())

    def tokens(self, digests: list[bytes]) -> list[str]:
        """The tokens of words of those digests (`digest`), in order."""
        if not digests:
            return []
        blocks = self._cipher.encryptor().update(b"".join(raw + _PAD for raw in digests))
        # Each block and two zero bytes make 24 characters of one base64
        # encoding, of which the first 22 are the block's own.
        count = len(digests)
        joined = b"".join(blocks[n * 16 : n * 16 + 16] + b"\x00\x00" for n in range(count))
        text = base64.urlsafe_b64encode(joined).decode("ascii")
        return [self.prefix + text[n * 24 : n * 24 + _TOKEN_CHARS] for n in range(count)]

    def digests(self, tokens: list[str]) -> list[bytes | None]:
        """The digests those tokens were made of, in order; None for a text
        that is no token of this key (another key's, or a raw writer's)."""
        prefix, size = self.prefix, len(self.prefix)
        texts = [token[size:] if token.startswith(prefix) else None for token in tokens]
        whole = [text for text in texts if text is not None and len(text) == _TOKEN_CHARS]
        try:
            joined = base64.b64decode("".join(text + "AA" for text in whole), b"-_", validate=True)
        except (
            binascii.Error,
            ValueError,
        ):  # a text that is no base64 (a raw writer's): each alone
            return [None] if len(tokens) == 1 else [self.digests([t])[0] for t in tokens]
        raw = b"".join(joined[n * 18 : n * 18 + 16] for n in range(len(whole)))
        plain = self._cipher.decryptor().update(raw) if raw else b""
        found: list[bytes | None] = []
        at = 0
        for text in texts:
            if text is None or len(text) != _TOKEN_CHARS:
                found.append(None)
                continue
            block = plain[at : at + 16]
            at += 16
            found.append(block[:_DIGEST] if block[_DIGEST:] == _PAD else None)
        return found

    def rekey(self, tokens: list[str], new: WordKey) -> list[str | None]:
        """Those tokens of this key as ``new`` makes them (None for a text
        that is no token of this key), without their words."""
        digests = self.digests(tokens)
        made = iter(new.tokens([raw for raw in digests if raw is not None]))
        return [None if raw is None else next(made) for raw in digests]


def old_digest(token: str) -> bytes | None:
    """The digest of a token made by `token` alone (a word index sealed
    before word keys held those); None when it is no such token."""
    try:
        raw = base64.b32decode(token.upper() + "=" * (-len(token) % 8))
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == _DIGEST else None
