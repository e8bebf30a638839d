"""`SessionStore.compact`: where a compaction of a built context may start.

The cut is `safe_cut`'s, over the context's messages without the previous
summary (a new compaction summarizes it again, never keeps it). With no
dialect named, it is the latest cut safe in every dialect at once: a
session's messages have one shape, in which the others see no exchange, so
this costs nothing and needs no configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from sessionstore.backends.contexts import BuiltContext
from sessionstore.context import safe_cut
from sessionstore.errors import ConfigurationError, SessionConflictError
from sessionstore.models import CompactionEntry, Message
from sessionstore.pairing import PairingDialect, rules
from sessionstore.wire.limits import U64_MAX

__all__ = ["arrived_since", "check_compaction", "compaction_of", "cut_in_every_dialect"]

_DIALECTS: tuple[PairingDialect, ...] = get_args(PairingDialect)


def check_compaction(
    summary: object, keep_last: object, tokens_before: object, dialect: object
) -> None:
    if not isinstance(summary, str):
        raise ConfigurationError(f"summary must be a string, not {type(summary).__name__}")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
        raise ConfigurationError(f"keep_last must be an integer, 0 or more, not {keep_last!r}")
    if tokens_before is not None and (
        isinstance(tokens_before, bool)
        or not isinstance(tokens_before, int)
        or not 0 <= tokens_before <= U64_MAX
    ):
        raise ConfigurationError(
            f"tokens_before must be None or 0 to 2**64-1 (what a line can carry), "
            f"not {tokens_before!r}"
        )
    if dialect is not None:
        rules(dialect)


def cut_in_every_dialect(messages: Sequence[Message], keep_last: int) -> int | None:
    """The index of the latest cut keeping ``keep_last`` messages or more that
    is safe in every dialect; None when nothing is kept.

    Each `safe_cut` moves the cut back, never forward: moving it to the
    earliest of theirs until all agree ends at the latest all accept.
    """
    numbered = [(str(i), message) for i, message in enumerate(messages)]
    cut = max(0, len(messages) - keep_last)
    while True:
        found = (safe_cut(numbered, len(messages) - cut, dialect=d) for d in _DIALECTS)
        cuts = {None if c is None else int(c) for c in found}
        if None in cuts:
            return None
        earliest = min(c for c in cuts if c is not None)
        if earliest == cut:  # each cut is at or before ``cut``: all agree
            return cut
        cut = earliest


def compaction_of(
    built: BuiltContext[Any],
    summary: str,
    *,
    keep_last: int,
    tokens_before: int | None,
    dialect: PairingDialect | None,
) -> CompactionEntry:
    """The compaction of ``built`` keeping its last ``keep_last`` messages; with
    none kept, its ``first_kept_id`` is its own id, naming no message."""
    ids, messages = built.ids, built.messages
    if built.summarized:  # the previous summary is summarized again, never kept
        ids, messages = ids[1:], messages[1:]
    if dialect is None:
        index = cut_in_every_dialect(messages, keep_last)
        first = None if index is None else ids[index]
    else:
        first = safe_cut(list(zip(ids, messages, strict=True)), keep_last, dialect=dialect)
    entry = CompactionEntry.new(summary, "", tokens_before)
    return entry.model_copy(update={"first_kept_id": entry.id if first is None else first})


def arrived_since(session_id: str, seen: BuiltContext[Any], now: BuiltContext[Any]) -> int:
    """How many messages the context ``now`` holds past the end of ``seen``.

    Raises:
        SessionConflictError: another compaction was appended meanwhile: a
            summary written from ``seen`` cannot stand for what it summarized.
    """
    if now.last == seen.last:
        return 0
    start = seen.ids[0] if seen.summarized else None
    if start == (now.ids[0] if now.summarized else None):  # no compaction since
        if seen.last == "":
            return len(now.ids)
        if seen.last in now.ids:
            ids = now.ids
            return len(ids) - 1 - max(i for i, id_ in enumerate(ids) if id_ == seen.last)
    reason = (
        "compacted by another writer since this compaction read the context "
        f"(which ended at {seen.last!r}); nothing was written"
    )
    raise SessionConflictError(session_id, reason, expected=seen.last, actual=now.last)
