"""The checks of a store's arguments, before it reads or writes: one for
every backend, so an argument is refused the same way everywhere."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import EllipsisType
from typing import Literal

from sessionstore.errors import (
    ConfigurationError,
    InvalidCursorError,
    SessionConflictError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import Erasure
from sessionstore.wire.limits import SURROGATE

__all__ = [
    "COUNT_MAX",
    "Durability",
    "JournalDurability",
    "check_after",
    "check_durability",
    "check_expect_last",
    "check_expectations",
    "check_head",
    "check_journal_durability",
    "check_last",
    "check_limit",
    "check_reason",
    "check_slice",
    "check_text",
    "check_unchanged",
]

COUNT_MAX = sys.maxsize // 2
"""More than any store holds: a larger limit or position is brought down to it
(a database's integer holds it, and one more)."""


Durability = Literal["normal", "full"]
"""What a committed write survives: a crash of the process, or a power loss."""


JournalDurability = Literal["full", "store"]
"""How a journal's appends commit: with a full sync whatever the store's
durability (``"full"``: they survive a power loss), or as the store's own
writes do (``"store"``: a power loss too at ``durability="full"``, a crash
of the process at ``"normal"``)."""


def check_journal_durability(durability: object) -> None:
    if durability not in ("full", "store"):
        raise ConfigurationError(
            f"a journal's durability must be 'full' or 'store', not {durability!r}"
        )


def check_durability(durability: object) -> None:
    if durability not in ("normal", "full"):
        raise ConfigurationError(f"durability must be 'normal' or 'full', not {durability!r}")


def check_text(
    text: str,
    what: str,
    *,
    session_id: str | None = None,
    kind: str = "session",
    error: Callable[[str], SessionStoreError] = ConfigurationError,
) -> None:
    """Refuse with ``error`` a string argument ``what`` holding a lone
    surrogate, which UTF-8 cannot carry (naming the ``kind`` ``session_id``)."""
    found = None if text.isascii() else SURROGATE.search(text)
    if found is None:
        return
    where = "" if session_id is None else f"{kind} {session_id!r}: "
    raise error(
        f"{where}{what} holds a lone surrogate ({found.group()!r} at index {found.start()}), "
        "which UTF-8 cannot carry"
    )


def check_after(after: object) -> None:
    if after is not None:
        if not isinstance(after, str):
            raise InvalidCursorError(f"not a cursor: {after!r}")
        check_text(after, "after", error=InvalidCursorError)


def check_expect_last(
    expect_last: object, *, session_id: str | None = None, kind: str = "session"
) -> None:
    if expect_last is None:
        return
    if not isinstance(expect_last, str):
        raise ConfigurationError(
            f"expect_last must be an entry id, '' (no entry) or None, not {expect_last!r}"
        )
    check_text(expect_last, "expect_last", session_id=session_id, kind=kind)


def check_last(session_id: str, expect_last: str | None, last: str, *, by: str = "append") -> None:
    """Refuse an append (or ``by="move"``) whose ``expect_last`` is not the
    session's ``last`` entry id (``""`` for none)."""
    if expect_last is not None and expect_last != last:
        raise SessionConflictError.last_entry(session_id, expect_last, last, by=by)


def check_expectations(
    expect_last: object, expect_head: object, *, session_id: str | None = None
) -> None:
    """Refuse an append's expectations before anything is read."""
    check_expect_last(expect_last, session_id=session_id)
    if expect_head is not None:
        if not isinstance(expect_head, str):
            raise ConfigurationError(f"expect_head must be a head's name, not {expect_head!r}")
        validate_session_id(expect_head)


def check_head(
    name: str, expect: str | EllipsisType | None, current: str | None, *, by: str = "move"
) -> None:
    """Refuse a head move (or ``by="append"``) whose ``expect`` (``...``:
    anything) is not where the head stands (None: never set)."""
    if expect is not ... and expect != current:
        raise SessionConflictError.head_moved(name, expect, current, by=by)


def check_slice(start: object, stop: object) -> tuple[int, int | None]:
    """Slice positions checked, brought within `COUNT_MAX` (which slices the same)."""
    if not isinstance(start, int) or isinstance(start, bool):
        raise ConfigurationError(f"start must be an int, not {start!r}")
    if stop is not None and (not isinstance(stop, int) or isinstance(stop, bool)):
        raise ConfigurationError(f"stop must be an int or None, not {stop!r}")
    return _within(start), None if stop is None else _within(stop)


def _within(position: int) -> int:
    return max(-COUNT_MAX, min(position, COUNT_MAX))


def check_limit(limit: object, *, allow_none: bool) -> None:
    if limit is None and allow_none:
        return
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        more = " or None" if allow_none else ""
        raise ConfigurationError(f"limit must be 1 or more{more}, not {limit!r}")


def check_reason(reason: object, *, session_id: str | None = None) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError(f"an erasure needs a reason (a non-empty string), not {reason!r}")
    check_text(reason, "reason", session_id=session_id)


def check_unchanged(record: Erasure, digest: str | None) -> None:
    """Refuse an erase whose session's bytes no longer have ``digest`` (if given)."""
    if digest is not None and digest.lower() != record.digest:
        raise SessionConflictError(
            record.name, "its bytes changed since they had the digest given: not erased"
        )
