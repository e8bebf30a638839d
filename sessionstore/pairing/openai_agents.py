"""The ``"openai-agents"`` dialect: Responses API items, as the openai-agents
SDK keeps them.

A ``{"type": "function_call", "call_id": ...}`` item is answered by one
``{"type": "function_call_output", "call_id": ...}`` item somewhere after it.
The Responses API, unlike Chat Completions, takes other items between a call
and its output, so only their order counts here.

A message holds items in one of three ways, tried in this order (`items_of`,
the one place to change for another mapping):

* its extra fields are the item: ``Message(role="assistant", content="",
  type="function_call", call_id="c1", name="f", arguments="{}")``;
* its content is the item, a dict;
* its content is a list of items (and maybe other parts).

The role does not matter. A made-up output is a new ``tool`` message holding
the item the way the call's message holds its call (`interrupted`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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

CALL, OUTPUT = "function_call", "function_call_output"

Where = Literal["fields", "content"] | int
"""Where a message holds an item: its extra fields, its content, or this
position of its content list."""


def items_of(message: Message) -> list[tuple[Where, str, str | None]]:
    """The function calls and outputs a message holds: where, which, call id."""
    fields, content = message.extra, message.content
    held: list[tuple[Where, Any]]
    if fields.get("type") in (CALL, OUTPUT):
        held = [("fields", fields)]
    elif isinstance(content, dict):
        held = [("content", content)]
    elif isinstance(content, list):
        held = list(enumerate(content))
    else:
        held = []
    return [
        (where, item["type"], string(item.get("call_id")))
        for where, item in held
        if isinstance(item, dict) and item.get("type") in (CALL, OUTPUT)
    ]


@dataclass
class AgentExchanges(Exchanges):
    """`Exchanges`, and where the items a repair works on are.

    Attributes:
        strays: (message, where) of every output that answers no call.
        unanswered: (message, where, call id) of every call without output.
    """

    strays: set[tuple[int, Where]] = field(default_factory=set)
    unanswered: list[tuple[int, Where, str]] = field(default_factory=list)


def exchanges(messages: Sequence[Message]) -> AgentExchanges:
    """Walk the messages: every exchange, every orphan."""
    found = AgentExchanges()
    calls = [
        (i, where, call_id)
        for i, message in enumerate(messages)
        for where, kind, call_id in items_of(message)
        if kind == CALL and call_id is not None
    ]
    every_call = {call_id for _, _, call_id in calls}
    waiting: dict[str, list[int]] = {}  # call id -> its unanswered calls, as positions in calls
    answered: set[str] = set()
    seen = 0
    for i, message in enumerate(messages):
        for where, kind, call_id in items_of(message):
            if kind == CALL:
                if call_id is not None:
                    waiting.setdefault(call_id, []).append(seen)
                    seen += 1
            elif call_id is not None and waiting.get(call_id):
                # The nearest call with that id: ids reused turn after turn pair up turn by turn.
                found.pairs.append((calls[waiting[call_id].pop()][0], i))
                answered.add(call_id)
            else:
                found.stray(i, call_id, every_call, answered)
                found.strays.add((i, where))
    found.unanswered = [calls[n] for n in sorted(n for left in waiting.values() for n in left)]
    found.orphans += [Orphan(i, call_id, "missing_result") for i, _, call_id in found.unanswered]
    found.done()
    return found


def interrupted(where: Where, call_id: str) -> Message:
    """The made-up output of a call that never got one, held the way the call is."""
    output = {"type": OUTPUT, "call_id": call_id, "output": INTERRUPTED_RESULT}
    if where == "fields":
        return made("tool", "", **output)
    return made("tool", output if where == "content" else [output])


def repair(messages: Sequence[Message]) -> list[Message]:
    """Drop the outputs that answer no call; make one up for each call that got
    none, after the run of item messages the call is in."""
    found = exchanges(messages)
    before: dict[int, list[Message]] = {}  # message index -> made-up outputs to put before it
    for i, where, call_id in found.unanswered:
        end = i + 1
        while end < len(messages) and items_of(messages[end]):
            end += 1
        before.setdefault(end, []).append(interrupted(where, call_id))
    repaired: list[Message] = []
    for i, message in enumerate(messages):
        repaired += before.get(i, [])
        strays = {where for at, where in found.strays if at == i}
        if not strays:
            repaired.append(message)
        elif isinstance(message.content, list) and not strays & {"fields", "content"}:
            kept = [part for n, part in enumerate(message.content) if n not in strays]
            if kept:  # a message of stray outputs only goes
                repaired.append(changed(message, kept))
    repaired += before.get(len(messages), [])
    return repaired
