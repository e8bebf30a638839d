"""The names a `sessionstore.scoped.ScopedStore` keeps to itself: an owner's
prefix and the session ids of that form it refuses.

Every owner's heads and journals are the store's ``prefix + name``, and an
adapter's conversation begins with the session ``prefix + name``
(`sessionstore.integrations.conversation.first_id`). The prefix is no secret
(``owner-`` and 24 hex digits of an unkeyed BLAKE2b of the owner): so a view
makes no session whose id has that form unless it is its own prefix, else
one tenant could take another's conversation's first id before it began.
"""

from __future__ import annotations

import hashlib
import re

from sessionstore.errors import InvalidSessionIdError

__all__ = ["RESERVED", "check_new_id", "prefix_of"]

RESERVED = re.compile(r"owner-[0-9a-f]{24}:")
"""How an owner's prefix looks: a session id beginning so is a view's to make."""


def prefix_of(owner: str) -> str:
    """The prefix of the owner's names in the store (raises UnicodeEncodeError)."""
    digest = hashlib.blake2b(owner.encode("utf-8"), digest_size=12).hexdigest()
    return f"owner-{digest}:"


def check_new_id(session_id: str, prefix: str) -> str:
    """Refuse a new session's id that begins as an owner's prefix does, unless
    it is ``prefix`` (the view's own); the same refusal whoever's it is.

    Raises:
        InvalidSessionIdError: the id is reserved to another view.
    """
    if RESERVED.match(session_id) and not session_id.startswith(prefix):
        raise InvalidSessionIdError(
            session_id,
            "ids beginning 'owner-', 24 hex digits and ':' are reserved to scoped"
            f" stores, and this one's begin {prefix!r}",
        )
    return session_id
