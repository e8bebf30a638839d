"""Tamper evidence: a digest chained through each session's rows.

A session's row holds the digest of its header line; each entry's row holds
the digest of the previous one (the header's, for the first entry) followed
by its own line. Any byte of a line changed after it was written, however
it got there (a flipped bit on disk, an edit behind the triggers' back),
breaks the chain at that entry, and ``integrity()`` (``sessionstore
verify``) names the first one of each session.

This is evidence of corruption and of naive tampering, not a signature: the
digests hold no secret, so someone able to rewrite the rows can rewrite the
digests too.
"""

from __future__ import annotations

import hashlib

__all__ = ["DIGEST_SIZE", "entry_digest", "header_digest"]

DIGEST_SIZE = 16
"""Bytes of each digest (BLAKE2b-128)."""


def header_digest(header: str) -> bytes:
    """The digest a session's chain starts from: its header line's."""
    return hashlib.blake2b(header.encode(), digest_size=DIGEST_SIZE).digest()


def entry_digest(previous: bytes, line: str) -> bytes:
    """An entry's digest: the previous row's digest, then its own line."""
    digest = hashlib.blake2b(previous, digest_size=DIGEST_SIZE)
    digest.update(line.encode())
    return digest.digest()
