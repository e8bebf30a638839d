"""The checks of a store's arguments, before it reads or writes: one for
every backend, so an argument is refused the same way everywhere."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from types import EllipsisType
from typing import Literal

from sessionstore.backends.records import encoded
from sessionstore.errors import (
    ConfigurationError,
    DuplicateSessionError,
    InvalidCursorError,
    InvalidRecordError,
    SessionConflictError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import Erasure, HeadMove, SessionMeta, TitleChange
from sessionstore.wire.limits import SURROGATE

__all__ = [
    "COUNT_MAX",
    "Durability",
    "JournalDurability",
    "check_after",
    "check_digest",
    "check_durability",
    "check_expect_last",
    "check_expectations",
    "check_fork",
    "check_head",
    "check_head_expectations",
    "check_journal_durability",
    "check_last",
    "check_limit",
    "check_reason",
    "check_slice",
    "check_text",
    "check_unchanged",
    "checked_moves",
    "checked_title_changes",
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


def check_digest(digest: object) -> None:
    if digest is not None and (
        not isinstance(digest, str) or re.fullmatch(r"[0-9a-fA-F]{64}", digest) is None
    ):
        raise ConfigurationError(
            f"digest must be a BLAKE2b-256 in hex (64 digits) or None, not {digest!r}"
        )


def check_fork(source_id: str, at: object, meta: object) -> SessionMeta:
    """The header a fork of ``source_id`` is given (``meta``, its parent
    filled in), once ``at`` and ``meta`` are checked."""
    if not isinstance(meta, SessionMeta):
        raise InvalidRecordError(f"expected a SessionMeta, got {type(meta).__name__}")
    if meta.parent_session is None:
        meta = meta.model_copy(update={"parent_session": source_id})
    elif meta.parent_session != source_id:
        raise InvalidRecordError(
            f"a fork of {source_id!r} cannot name {meta.parent_session!r} as its parent"
        )
    if at is not None:
        if not isinstance(at, str):
            raise InvalidRecordError(f"at must be an entry id (a string), not {at!r}")
        check_text(at, "at", session_id=source_id, error=InvalidRecordError)
    if meta.id == source_id:  # the source's own id is taken, by the source
        raise DuplicateSessionError(meta.id)
    return meta


def check_head_expectations(name: str, expect: object, expect_last: object) -> None:
    """The conditions of a move of head ``name`` (`SessionStore.set_head`)."""
    if isinstance(expect, str):
        check_text(expect, "expect", session_id=name, kind="head")
    elif expect is not ... and expect is not None:
        raise ConfigurationError(
            f"expect must be a session id, None (a head never set) or left out, not {expect!r}"
        )
    check_expect_last(expect_last, session_id=name, kind="head")
    if expect_last is not None and not isinstance(expect, str):
        raise ConfigurationError("expect_last needs expect to name the session it ends")


def checked_moves(name: str, moves: Sequence[object]) -> list[HeadMove]:
    """``moves`` of head ``name`` to import, each a `HeadMove` a line can carry."""
    checked: list[HeadMove] = []
    for number, move in enumerate(moves, 1):
        if not isinstance(move, HeadMove):
            raise InvalidRecordError(f"expected a HeadMove, got {type(move).__name__}")
        validate_session_id(move.session_id)
        encoded(move, f"head {name!r}, move {number}")
        checked.append(move)
    return checked


def checked_title_changes(
    session_id: str, changes: Sequence[object], after: object
) -> list[TitleChange]:
    """Title changes of ``session_id`` to import after ``after`` of them."""
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ConfigurationError(f"after must be a count (0 or more), not {after!r}")
    checked: list[TitleChange] = []
    for number, change in enumerate(changes, 1):
        if not isinstance(change, TitleChange):
            raise InvalidRecordError(f"expected a TitleChange, got {type(change).__name__}")
        if change.session_id != session_id:
            raise InvalidRecordError(
                f"a title change of {change.session_id!r} given for {session_id!r}"
            )
        encoded(change, f"session {session_id!r}, title change {number}")
        checked.append(change)
    return checked
