"""`build_context`: the messages to send to a model, from a session's log; and
the checks of the tool exchanges in such a list, with their repairs.

A model API refuses a history whose tool calls and tool results have come
apart (a cut, a crash mid-turn, a duplicated or trimmed result): OpenAI with
"messages with role 'tool' must be a response to a preceding message with
'tool_calls'", Anthropic with "tool_use ids were found without tool_result
blocks immediately after". `check_pairing` names every such orphan, and
`repair_pairing` gives a list the API takes. Both are pure functions of a
list of messages: they never touch a store. Each takes the ``dialect`` of
the messages (`PairingDialect`), whose shapes are described in its module:
``"openai"`` (`sessionstore.pairing.openai_chat`), ``"anthropic"``
(`sessionstore.pairing.anthropic`) and ``"openai-agents"``
(`sessionstore.pairing.openai_agents`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.models import CompactionEntry, Message, MessageEntry
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
    "repair_pairing",
    "summary_message",
]

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

    A result without its call, a repeated one, or one out of place, is
    dropped (for Anthropic, a result in the right message but behind other
    content is moved to the front instead). A call that never got a result
    gets one made up, saying the call was interrupted (`INTERRUPTED_RESULT`),
    right after the exchange: a ``tool`` message (OpenAI), a ``tool_result``
    block with ``is_error`` at the head of the next user message, or in a new
    user message when the next message is not one (Anthropic), a
    ``function_call_output`` item in a new ``tool`` message of the call's
    shape (openai-agents). Every message made or changed has the extra field
    `SYNTHETIC_FIELD` set to ``True``; no other message is changed or moved.

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
