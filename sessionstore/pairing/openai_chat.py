"""The ``"openai"`` dialect: OpenAI Chat Completions.

An ``assistant`` message's ``tool_calls`` extra field holds the calls
(``[{"id": ..., "type": "function", "function": {...}}]``). Each call gets
one ``tool`` message whose ``tool_call_id`` names it, among the ``tool``
messages right after the call, in any order: the API refuses a ``tool``
message anywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.models import Message
from sessionstore.pairing.exchanges import (
    INTERRUPTED_RESULT,
    Exchanges,
    Orphan,
    made,
    string,
)

__all__ = ["exchanges", "repair"]


def calls_of(message: Message) -> list[str]:
    """The call ids of a message, once each, in order."""
    calls = message.extra.get("tool_calls") if message.role == "assistant" else None
    if not isinstance(calls, list):
        return []
    ids = (string(call.get("id")) for call in calls if isinstance(call, dict))
    return list(dict.fromkeys(call_id for call_id in ids if call_id is not None))


def answered_id(message: Message) -> str | None:
    """The call id a ``tool`` message answers."""
    return string(message.extra.get("tool_call_id"))


def exchanges(messages: Sequence[Message]) -> Exchanges:
    """Walk the messages: every exchange, every orphan."""
    found = Exchanges()
    every_call = {call_id for message in messages for call_id in calls_of(message)}
    answered: set[str] = set()
    i = 0
    while i < len(messages):
        calls, start = calls_of(messages[i]), i
        if messages[i].role == "tool":
            found.stray(i, answered_id(messages[i]), every_call, answered)
        i += 1
        got: set[str] = set()
        while calls and i < len(messages) and messages[i].role == "tool":
            call_id = answered_id(messages[i])
            if call_id is not None and call_id in calls and call_id not in got:
                got.add(call_id)
                answered.add(call_id)
                found.pairs.append((start, i))
            else:
                found.stray(i, call_id, every_call, answered)
            i += 1
        found.orphans += [Orphan(start, c, "missing_result") for c in calls if c not in got]
    found.done()
    return found


def repair(messages: Sequence[Message]) -> list[Message]:
    """Drop the results outside their exchange; after each call's own results,
    a ``tool`` message for each call that got none."""
    repaired: list[Message] = []
    i = 0
    while i < len(messages):
        message, calls = messages[i], calls_of(messages[i])
        i += 1
        if message.role == "tool":
            continue  # a result outside any exchange
        repaired.append(message)
        got: set[str] = set()
        while calls and i < len(messages) and messages[i].role == "tool":
            call_id = answered_id(messages[i])
            if call_id is not None and call_id in calls and call_id not in got:
                got.add(call_id)
                repaired.append(messages[i])
            i += 1
        repaired += [
            made("tool", INTERRUPTED_RESULT, tool_call_id=call_id)
            for call_id in calls
            if call_id not in got
        ]
    return repaired
