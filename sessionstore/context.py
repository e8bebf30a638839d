"""`build_context`: the messages to send to a model, from a session's log; and
the checks of the tool exchanges in such a list, with their repairs.

A model API refuses a history whose tool calls and tool results have come
apart (a cut, a crash mid-turn, a duplicated or trimmed result): OpenAI with
"messages with role 'tool' must be a response to a preceding message with
'tool_calls'", Anthropic with "tool_use ids were found without tool_result
blocks immediately after". `check_pairing` names every such orphan,
`repair_pairing` gives a list the API takes, and `safe_cut` chooses where a
compaction may start without cutting an exchange in two. All three are pure
functions of a list of messages: they never touch a store. Each takes the
``dialect`` of the messages (`PairingDialect`), whose shapes are described in
its module: ``"openai"`` (`sessionstore.pairing.openai_chat`),
``"anthropic"`` (`sessionstore.pairing.anthropic`) and ``"openai-agents"``
(`sessionstore.pairing.openai_agents`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.errors import ConfigurationError
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
    "safe_cut",
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


def safe_cut(
    messages: Sequence[tuple[str, Message]], keep_last: int, *, dialect: PairingDialect
) -> str | None:
    """Where a compaction keeping the last ``keep_last`` messages may start.

    The cut keeps at least ``keep_last`` messages and never starts inside a
    tool exchange: when a kept result's call would be cut off, the cut moves
    back to the message holding that call. Nor does it start at a result
    whose call is missing already. So the context ``[summary, *kept]`` has
    no orphan when the whole history had none.

    Args:
        messages: a session's messages, each with its entry id, in order.
        keep_last: how many of the last messages to keep at least; 0 keeps
            none.
        dialect: the shape of the messages' tool exchanges (`PairingDialect`).

    Returns:
        The entry id of the first message to keep: the compaction's
        ``first_kept_id``. None when nothing is kept (``keep_last`` is 0 or
        there are no messages): give the compaction a ``first_kept_id`` that
        names no message, such as its own id, so that its context keeps
        only what comes after it.

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
