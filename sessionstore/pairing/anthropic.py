"""The ``"anthropic"`` dialect: Anthropic Messages.

An ``assistant`` message's content list holds ``tool_use`` blocks
(``{"type": "tool_use", "id": ...}``). The very next message is a ``user``
message whose content list holds one ``tool_result`` block
(``{"type": "tool_result", "tool_use_id": ...}``) for each, before any other
block; the API refuses a ``tool_result`` block anywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessionstore.models import Message
from sessionstore.pairing.exchanges import (
    INTERRUPTED_RESULT,
    Exchanges,
    Orphan,
    changed,
    made,
    string,
)

__all__ = ["exchanges", "repair"]


def is_block(block: Any, kind: str) -> bool:
    """Whether a content part is a block of this type."""
    return isinstance(block, dict) and block.get("type") == kind


def calls_of(message: Message) -> list[str]:
    """The ``tool_use`` ids of a message, once each, in order."""
    if message.role != "assistant" or not isinstance(message.content, list):
        return []
    ids = (string(b.get("id")) for b in message.content if is_block(b, "tool_use"))
    return list(dict.fromkeys(call_id for call_id in ids if call_id is not None))


def exchanges(messages: Sequence[Message]) -> Exchanges:
    """Walk the messages: every exchange, every orphan."""
    found = Exchanges()
    every_call = {call_id for message in messages for call_id in calls_of(message)}
    answered: set[str] = set()
    calls: list[str] = []  # of the message before
    for i, message in enumerate(messages):
        blocks = message.content if isinstance(message.content, list) else []
        answers = bool(calls) and message.role == "user"
        got: set[str] = set()
        behind = False  # another block came first
        for block in blocks:
            if not is_block(block, "tool_result"):
                behind = True
                continue
            call_id = string(block.get("tool_use_id"))
            if answers and call_id is not None and call_id in calls and call_id not in got:
                got.add(call_id)
                answered.add(call_id)
                found.pairs.append((i - 1, i))
                if behind:
                    found.orphans.append(Orphan(i, call_id, "misplaced_result"))
            else:
                found.stray(i, call_id, every_call, answered)
        found.orphans += [Orphan(i - 1, c, "missing_result") for c in calls if c not in got]
        calls = calls_of(message)
    found.orphans += [Orphan(len(messages) - 1, c, "missing_result") for c in calls]
    found.done()
    return found


def interrupted(call_id: str) -> dict[str, Any]:
    """The ``tool_result`` block of a call that never got one."""
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": INTERRUPTED_RESULT,
        "is_error": True,
    }


def blocks_of(content: Any) -> list[Any]:
    """A user message's content as a list of blocks."""
    if isinstance(content, list):
        return content
    if content is None or content == "":
        return []
    return [{"type": "text", "text": content} if isinstance(content, str) else content]


def answer(message: Message, calls: list[str]) -> Message:
    """The user message after a tool use, repaired: its results for ``calls``
    first, one each (moved ahead of other blocks), those missing made up,
    then its other blocks."""
    results: dict[str, Any] = {}
    others = []
    for block in blocks_of(message.content):
        if not is_block(block, "tool_result"):
            others.append(block)
            continue
        call_id = string(block.get("tool_use_id"))
        if call_id is not None and call_id in calls:
            results.setdefault(call_id, block)
    missing = [interrupted(call_id) for call_id in calls if call_id not in results]
    content = [*results.values(), *missing, *others]
    return message if content == message.content else changed(message, content)


def repair(messages: Sequence[Message]) -> list[Message]:
    """Drop the results outside their exchange; give each tool use its results
    at the head of the next user message, or of a new one before the next
    message when that is not a user message."""
    repaired: list[Message] = []
    calls: list[str] = []  # of the message before
    for message in messages:
        if calls and message.role == "user":
            repaired.append(answer(message, calls))
        else:
            if calls:
                repaired.append(made("user", [interrupted(c) for c in calls]))
            content = message.content
            if isinstance(content, list) and any(is_block(b, "tool_result") for b in content):
                kept = [block for block in content if not is_block(block, "tool_result")]
                if kept:  # a message of stray results only goes
                    repaired.append(changed(message, kept))
            else:
                repaired.append(message)
        calls = calls_of(message)
    if calls:
        repaired.append(made("user", [interrupted(c) for c in calls]))
    return repaired
