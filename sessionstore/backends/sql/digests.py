"""Tamper evidence: a digest chained through each session's rows (BLAKE2b-128).

Evidence of corruption and naive tampering, not a signature: the digests
hold no secret. docs/sql.md, Tables.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import Any

ENTRY_COLUMNS = ("entry_id", "type", "timestamp", "first_kept_id", "line")  # digested
DIGEST_SIZE = 16


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
    """The digest a fork's chain starts from: its header line's, then how many
    entries it shares and the last one's digest (a shared row changed breaks it too)."""
    digest = hashlib.blake2b(header_digest(header), digest_size=DIGEST_SIZE)
    digest.update(struct.pack("<Q", base_seq))
    digest.update(base)
    return digest.digest()
