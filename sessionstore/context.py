"""`build_context`: the messages to send to a model, from a session's log; and
the checks of the tool exchanges in such a list, with their repairs.

A model API refuses a history whose tool calls and results have come apart
(a cut, a crash mid-turn). `check_pairing` names every orphan,
`repair_pairing` gives a list the API takes, `safe_cut` chooses where a
compaction may start: pure functions of a list of messages, each given the
messages' ``dialect`` (`PairingDialect`: ``"openai"``, ``"anthropic"``,
``"openai-agents"``, described in `sessionstore.pairing`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.errors import ConfigurationError
from sessionstore.models import CompactionEntry, Message, MessageEntry, SessionEntry
from sessionstore.pairing import PairingDialect, rules
from sessionstore.pairing.exchanges import (
    INTERRUPTED_RESULT,
    SYNTHETIC_FIELD,
    Orphan,
    PairingProblem,
)

__all__ = [
    "INTERRUPTED_RESULT",
    "SYNTHETIC_FIELD",
    "Orphan",
    "PairingDialect",
    "PairingProblem",
    "build_context",
    "check_pairing",
    "context_entries",
    "context_message",
    "moves_start",
    "repair_pairing",
    "safe_cut",
    "summary_message",
]

SUMMARY_PREFIX = "[Conversation summary]\n"


def summary_message(compaction: CompactionEntry) -> Message:
    """The user message that stands for the history a compaction summarizes."""
    return Message.user(SUMMARY_PREFIX + compaction.summary)


def context_entries(
    entries: Sequence[SessionEntry],
) -> tuple[list[SessionEntry], str | None]:
    """The entries a context is built of: the one rule (SPEC section 4).

    With no compaction, every message entry in order. Otherwise the last
    compaction, then every message entry from the first whose id is its
    ``first_kept_id`` (anywhere) on; if none has it, every message entry
    after the compaction. ``entries`` may be the whole log or its end from
    there: the result is the same.

    Args:
        entries: a session's entries in append order.

    Returns:
        The entries, the compaction first (it stands for the history it
        summarizes: `context_message`); and the ``first_kept_id`` no message
        has yet, else None: a message appended with it moves the context's
        start (`moves_start`).
    """
    for last in range(len(entries) - 1, -1, -1):
        compaction = entries[last]
        if isinstance(compaction, CompactionEntry):
            break
    else:
        return [entry for entry in entries if isinstance(entry, MessageEntry)], None
    kept = compaction.first_kept_id
    start = next(
        (i for i, e in enumerate(entries) if isinstance(e, MessageEntry) and e.id == kept), None
    )
    found = start is not None
    after = entries[last + 1 :] if start is None else entries[start:]
    messages = [entry for entry in after if isinstance(entry, MessageEntry)]
    return [compaction, *messages], None if found else kept


def moves_start(kind: str, entry_id: str, waiting_for: str | None) -> bool:
    """Whether an entry (its ``type`` and id) appended after the entries of a
    context changes where it starts, so that it is built again rather than
    extended: a compaction does; so does a message with the id the last
    compaction keeps from when no message had it (``waiting_for``, as
    `context_entries` gives it)."""
    return kind != "message" or entry_id == waiting_for


def context_message(entry: SessionEntry) -> Message:
    """The message a context entry stands as: a message entry's message, a
    compaction's `summary_message`."""
    return entry.message if isinstance(entry, MessageEntry) else summary_message(entry)


def build_context(entries: Sequence[SessionEntry]) -> list[Message]:
    """Build the model context from a session's entries (SPEC section 4): the
    messages of `context_entries`, the compaction as a user message
    ``"[Conversation summary]\\n" + summary``. Nothing is removed from the store.

    Args:
        entries: a session's entries in append order.

    Returns:
        The messages to send.
    """
    return [context_message(entry) for entry in context_entries(entries)[0]]


def check_pairing(messages: Sequence[Message], *, dialect: PairingDialect) -> list[Orphan]:
    """Find the tool calls and results a model API would refuse.

    Args:
        messages: a context, as `build_context` gives it.
        dialect: the shape of the messages' tool exchanges (`PairingDialect`).

    Returns:
        Every orphan, by message index; empty when every call has its
        result where the API wants it and every result its call.

    Raises:
        ConfigurationError: an unknown dialect.
    """
    return rules(dialect).exchanges(messages).orphans


def repair_pairing(messages: Sequence[Message], *, dialect: PairingDialect) -> list[Message]:
    """Make a list of messages the model API takes, whatever came apart.

    A result without its call, repeated or out of place is dropped (an
    Anthropic result behind other content in the right message is moved to
    the front). A call without a result gets one saying it was interrupted
    (`INTERRUPTED_RESULT`), right after the exchange, in the dialect's shape.
    Every message made or changed has `SYNTHETIC_FIELD` set to ``True``; no
    other is changed or moved.

    Args:
        messages: a context, as `build_context` gives it; not modified.
        dialect: the shape of the messages' tool exchanges (`PairingDialect`).

    Returns:
        A new list that `check_pairing` finds no orphan in; equal to
        ``messages`` when that has none already, so repairing twice is
        repairing once.

    Raises:
        ConfigurationError: an unknown dialect.
    """
    dialect_rules = rules(dialect)
    if not dialect_rules.exchanges(messages).orphans:
        return list(messages)
    return dialect_rules.repair(messages)


def safe_cut(
    messages: Sequence[tuple[str, Message]], keep_last: int, *, dialect: PairingDialect
) -> str | None:
    """Where a compaction keeping the last ``keep_last`` messages may start.

    The cut keeps at least ``keep_last`` messages, moving back to the call
    of any kept result, and never starts on a result whose call is gone: so
    ``[summary, *kept]`` has no orphan when the history had none.

    Args:
        messages: a session's messages, each with its entry id, in order.
        keep_last: how many of the last messages to keep at least; 0 keeps
            none.
        dialect: the shape of the messages' tool exchanges (`PairingDialect`).

    Returns:
        The entry id of the first message to keep (the compaction's
        ``first_kept_id``); None when nothing is kept: then give it one that
        names no message, such as its own id.

    Raises:
        ConfigurationError: an unknown dialect, or a negative ``keep_last``.
    """
    dialect_rules = rules(dialect)
    if keep_last < 0:
        raise ConfigurationError(f"keep_last must be 0 or more, not {keep_last}")
    if keep_last == 0 or not messages:
        return None
    found = dialect_rules.exchanges([message for _, message in messages])
    # A cut at k splits a pair (call, result) when call < k <= result. A
    # result already without its call counts as answering the message before
    # it, so that no cut starts on it. lowest[k]: the lowest call of the pairs
    # whose result is at k or later.
    strays = [o.index for o in found.orphans if o.problem != "missing_result"]
    spans = found.pairs + [(result - 1, result) for result in strays]
    lowest = [len(messages)] * (len(messages) + 1)
    for call, result in spans:
        lowest[result] = min(lowest[result], call)
    for k in range(len(messages) - 1, -1, -1):
        lowest[k] = min(lowest[k], lowest[k + 1])
    cut = max(0, len(messages) - keep_last)
    while cut > 0 and lowest[cut] < cut:
        cut -= 1
    return messages[cut][0]
