"""`build_context`: the messages to send to a model, from a session's log."""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.models import CompactionEntry, Message, MessageEntry

__all__ = ["build_context", "summary_message"]

SUMMARY_PREFIX = "[Conversation summary]\n"


def summary_message(compaction: CompactionEntry) -> Message:
    """The user message that stands for the history a compaction summarizes."""
    return Message.user(SUMMARY_PREFIX + compaction.summary)


def build_context(entries: Sequence[MessageEntry | CompactionEntry]) -> list[Message]:
    """Build the model context from a session's entries (SPEC section 4).

    With no compaction, every message in order. Otherwise the last
    compaction wins: a user message ``"[Conversation summary]\\n" + summary``,
    then every message from the first message entry whose id equals the
    compaction's ``first_kept_id`` (anywhere in the log) to the end; if no
    message entry has that id, every message after that compaction.
    Compaction entries never appear in the result, and nothing is removed
    from the store: the cut exists only in the built context.

    Args:
        entries: a session's entries in append order.

    Returns:
        The messages to send.
    """
    for last in range(len(entries) - 1, -1, -1):
        compaction = entries[last]
        if isinstance(compaction, CompactionEntry):
            break
    else:
        return [entry.message for entry in entries if isinstance(entry, MessageEntry)]
    start = next(
        (
            i
            for i, entry in enumerate(entries)
            if isinstance(entry, MessageEntry) and entry.id == compaction.first_kept_id
        ),
        last + 1,
    )
    context = [summary_message(compaction)]
    context.extend(entry.message for entry in entries[start:] if isinstance(entry, MessageEntry))
    return context
