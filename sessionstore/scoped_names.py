"""The names a `sessionstore.scoped.ScopedStore` keeps to itself: an owner's
prefix, the session ids of that form it refuses, and what an `integrity` fault
names.

Every owner's heads and journals are the store's ``prefix + name``, and an
adapter's conversation begins with the session ``prefix + name``
(`sessionstore.integrations.conversation.first_id`). The prefix is no secret
(``owner-`` and 24 hex digits of an unkeyed BLAKE2b of the owner): so a view
makes no session whose id has that form unless it is its own prefix, else
one tenant could take another's conversation's first id before it began.
"""

from __future__ import annotations

import ast
import hashlib
import re

from sessionstore.errors import ConfigurationError, InvalidSessionIdError

__all__ = [
    "PREFIX_BYTES",
    "RESERVED",
    "check_new_id",
    "fault_subject",
    "owner_prefix",
    "prefix_of",
]

PREFIX_BYTES = 31
"""How long every owner's prefix is: ``owner-``, 24 hex digits, ``:``."""

RESERVED = re.compile(r"owner-[0-9a-f]{24}:")
"""How an owner's prefix looks: a session id beginning so is a view's to make."""


def prefix_of(owner: str) -> str:
    """The prefix of the owner's names in the store (raises UnicodeEncodeError)."""
    digest = hashlib.blake2b(owner.encode("utf-8"), digest_size=12).hexdigest()
    return f"owner-{digest}:"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def owner_prefix(owner: object) -> str:
    """The prefix of a view's owner, once checked: a non-empty string of valid
    Unicode holding no control character (below U+0020, or DEL).

    Raises:
        ConfigurationError: the owner is none of that.
    """
    if not isinstance(owner, str) or not owner:
        raise ConfigurationError(
            f"a scoped store's owner must be a non-empty string, not {owner!r}"
        )
    control = _CONTROL.search(owner)
    if control is not None:
        raise ConfigurationError(
            f"a scoped store's owner holds a control character ({control.group()!r} at"
            f" index {control.start()}): {owner!r}"
        )
    try:
        return prefix_of(owner)
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"a scoped store's owner must be valid Unicode, not {owner!r}"
        ) from None


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


_QUOTED = r"'[^'\\]*(?:\\.[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\""
# ``session 'x': ...``, ``head 'x', <path> line 2: ...`` (SQL, JSONL, memory).
_LEADING = re.compile(rf"(session|head|journal) ({_QUOTED})[:,]")
# A JSONL fault naming its file first: ``<dir>/heads/<name>.jsonl: ...``.
# Names hold no ``/``, nor does what follows the file (an OS error, a reason).
_FILES = [
    (re.compile(r".*/heads/([^/]+)\.jsonl: [^/]*"), "head"),
    (re.compile(r".*/titles/([^/]+)\.jsonl: [^/]*"), "session"),
    (re.compile(r".*/journals/([^/]+)/[^/]+\.jsonl: [^/]*"), "journal"),
    (re.compile(r".*/erasing/session/([^/]+): [^/]*"), "session"),
    (re.compile(r".*/erasing/journal/([^/]+): [^/]*"), "journal"),
    (re.compile(r".*/([^/]+)\.jsonl: [^/]*"), "session"),
]


def fault_subject(fault: str) -> tuple[str, str] | None:
    """What an `integrity` fault is about, as ``("session" | "head" | "journal",
    name)`` with the store's name; None for a fault of the storage as a whole."""
    leading = _LEADING.match(fault)
    if leading is not None:
        name = ast.literal_eval(leading.group(2))
        return (leading.group(1), name) if isinstance(name, str) else None
    for pattern, kind in _FILES:
        found = pattern.fullmatch(fault)
        if found is not None:
            return kind, found.group(1)
    return None
