"""Tamper evidence: a digest chained through each session's rows.

A session's row holds the digest of its header line (a fork's, of its
header line and of where it branched: see `fork_digest`); each entry's row holds
the digest of the previous one (the header's, for the first entry) followed
by its own columns: the line, and the id, type, timestamp and kept id the
queries read beside it. Any byte of them changed after it was written,
however it got there (a flipped bit on disk, an edit behind the triggers'
back), breaks the chain at that entry, and ``integrity()`` (``sessionstore
verify``) names the first one of each session.

This is evidence of corruption and of naive tampering, not a signature: the
digests hold no secret, so someone able to rewrite the rows can rewrite the
digests too.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import Any

__all__ = ["DIGEST_SIZE", "ENTRY_COLUMNS", "entry_digest", "fork_digest", "header_digest"]

ENTRY_COLUMNS = ("entry_id", "type", "timestamp", "first_kept_id", "line")
"""An entry row's columns its digest covers, in this order."""

DIGEST_SIZE = 16
"""Bytes of each digest (BLAKE2b-128)."""


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""


def header_digest(header: str | bytes) -> bytes:
    """The digest a session's chain starts from: its header line's."""
    return hashlib.blake2b(_bytes(header), digest_size=DIGEST_SIZE).digest()


def entry_digest(previous: bytes, row: Mapping[str, Any]) -> bytes:
    """An entry's digest: the previous row's digest, then each of its
    `ENTRY_COLUMNS` (text or its UTF-8 bytes), each after its length."""
    digest = hashlib.blake2b(previous, digest_size=DIGEST_SIZE)
    for column in ENTRY_COLUMNS:
        value = _bytes(row[column])
        digest.update(struct.pack("<Q", len(value)))
        digest.update(value)
    return digest.digest()


def fork_digest(header: str | bytes, base_seq: int, base: bytes) -> bytes:
    """The digest a fork's chain starts from: its header line's, then the
    number of entries it shares and the digest of the last of them (its
    base's entry ``base_seq``). A shared row changed, or the fork pointed
    at another place, breaks the fork's chain too."""
    digest = hashlib.blake2b(header_digest(header), digest_size=DIGEST_SIZE)
    digest.update(struct.pack("<Q", base_seq))
    digest.update(base)
    return digest.digest()
