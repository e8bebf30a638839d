"""Where a conversation's turn stands: what a resumed turn continues, and
what names its tools' effects when the model is asked again.

A crash mid-turn leaves the turn's input and maybe some tool calls and
outputs, and no answer; the rerun sends the same input, and a live model
answers with new tool-call ids. So the adapters name things by what a
rerun does not change:

* **The open turn** (`open_turn`) begins at the last ``user`` message and
  is open while no answer (an ``assistant`` message without
  ``tool_calls``) ends the conversation.
* **A resumed turn** (`resumes`): an input (``user``, ``system``,
  ``developer`` messages, one ``user`` at least) that the conversation
  ends with, followed only by what the turn made, is stored once: the
  rerun continues that turn.
* **An effect's key** (`turn_key`): docs/effects.md, through a framework's tools.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sessionstore import Message, MessageEntry, SessionEntry, SessionStore, args_digest

__all__ = [
    "INPUT_ROLES",
    "CallRanks",
    "OpenTurn",
    "answers",
    "arguments",
    "calls",
    "digest",
    "is_answer",
    "is_input",
    "open_turn",
    "openai_call",
    "openai_calls",
    "read_tail",
    "resumes",
    "stored_call_key",
    "tells_a_resume",
    "tells_the_turn",
    "turn_key",
]

INPUT_ROLES = frozenset({"user", "system", "developer"})
"""The roles of the messages a turn's input is made of."""

_CHUNK = 64  # entries read from the end at a time


def is_answer(entry: SessionEntry) -> bool:
    """Whether ``entry`` is an answer: an ``assistant`` message without ``tool_calls``."""
    return (
        isinstance(entry, MessageEntry)
        and entry.message.role == "assistant"
        and not entry.message.extra.get("tool_calls")
    )


def _is_input(entry: SessionEntry) -> bool:
    return isinstance(entry, MessageEntry) and entry.message.role in INPUT_ROLES


def _is_user(entry: SessionEntry) -> bool:
    return isinstance(entry, MessageEntry) and entry.message.role == "user"


@dataclass(frozen=True)
class OpenTurn:
    """Where a conversation's turn stands.

    Attributes:
        anchor: the entry id of its ``user`` message when the turn is open,
            else where the conversation stands (its last entry's id, or the
            session's id when empty).
        made: the entries stored since its ``user`` message.
    """

    anchor: str
    made: tuple[SessionEntry, ...]


def open_turn(session_id: str, tail: Sequence[SessionEntry], *, whole: bool) -> OpenTurn | None:
    """The turn ``tail`` (the last entries of ``session_id``, ``whole`` if all
    of them) ends in; None when it is too short to tell (read more)."""
    if not tail:
        return OpenTurn(session_id, ()) if whole else None
    if is_answer(tail[-1]):
        return OpenTurn(tail[-1].id, ())
    for at in range(len(tail) - 1, -1, -1):
        if _is_user(tail[at]):
            return OpenTurn(tail[at].id, tuple(tail[at + 1 :]))
    return OpenTurn(tail[-1].id, ()) if whole else None


def is_input(entries: Sequence[SessionEntry]) -> bool:
    """Whether ``entries`` may be a turn's input: messages of the input
    roles, at least one of them ``user``."""
    return all(_is_input(entry) for entry in entries) and any(_is_user(entry) for entry in entries)


def resumes(tail: Sequence[SessionEntry], entries: Sequence[SessionEntry]) -> bool:
    """Whether ``entries`` are the input of the open turn ``tail`` (a
    session's last entries, back past its last input) ends in, stored already."""
    if not is_input(entries) or (tail and is_answer(tail[-1])):
        return False
    end = _input_end(tail)
    start = end - len(entries)
    if start < 0:
        return False
    stored = tail[start:end]
    return all(
        isinstance(old, MessageEntry)
        and isinstance(new, MessageEntry)
        and old.message == new.message
        for old, new in zip(stored, entries, strict=True)
    )


async def read_tail(
    store: SessionStore,
    session_id: str,
    enough: Callable[[Sequence[SessionEntry]], bool],
    first: int = _CHUNK,
) -> tuple[list[SessionEntry], bool]:
    """The last entries of ``session_id``, doubled from ``first`` until
    ``enough`` of them; and whether they are the whole session."""
    read = await store.load_slice(session_id, -max(1, first))
    entries, start = list(read.entries), read.start
    while start > 0 and not enough(entries):
        more = await store.load_slice(session_id, max(0, start - max(1, len(entries))), start)
        entries, start = [*more.entries, *entries], more.start
    return entries, start == 0


def _input_end(tail: Sequence[SessionEntry]) -> int:
    """Where ``tail``'s last input ends: what the turn made since comes after."""
    end = len(tail)
    while end and not _is_input(tail[end - 1]):
        end -= 1
    return end


def tells_the_turn(tail: Sequence[SessionEntry]) -> bool:
    """Whether ``tail`` reaches back to the turn's start (`open_turn`)."""
    return bool(tail) and (is_answer(tail[-1]) or any(_is_user(entry) for entry in tail))


def tells_a_resume(count: int) -> Callable[[Sequence[SessionEntry]], bool]:
    """Whether a tail tells if an input of ``count`` messages resumes its turn (`resumes`)."""

    def enough(tail: Sequence[SessionEntry]) -> bool:
        if tail and is_answer(tail[-1]):
            return True
        return _input_end(tail) >= count

    return enough


def arguments(text: Any) -> Any:
    """A call's arguments as the key names them: JSON text as its value."""
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def digest(args: Any) -> str:
    """The digest of a call's arguments, as its intent records it."""
    return args_digest(args)


def turn_key(conversation: str, anchor: str, tool: str, args: Any, rank: int) -> str:
    """The key of a call's effect (docs/effects.md)."""
    return f"{conversation}:{anchor}:{tool}:{args_digest(args)[:16]}:{rank}"


class CallRanks:
    """Each call's rank among a turn's calls of one tool with the same
    arguments: those stored, then those this object saw run since, in the
    order they came; for the latest `SCOPES` (turn, tool, arguments)."""

    SCOPES = 1024
    """(turn, tool, arguments) whose calls are remembered at most, the latest."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
        self._lock = threading.Lock()

    def rank(self, scope: tuple[str, str, str], call_id: str, stored: Sequence[str]) -> int:
        """The rank of call ``call_id`` in ``scope``, given the ids of the
        identical calls the turn stored already (``stored``)."""
        kept = set(stored)
        with self._lock:
            seen = self._seen.setdefault(scope, [])
            self._seen.move_to_end(scope)
            while len(self._seen) > self.SCOPES:
                self._seen.popitem(last=False)
            if call_id not in seen:
                seen.append(call_id)
            running = [seen_id for seen_id in seen if seen_id not in kept]
        if call_id in kept:
            return list(stored).index(call_id)
        return len(kept) + running.index(call_id)


def openai_call(call_id: Any, name: str, arguments: str) -> dict[str, Any]:
    """A tool call in the OpenAI shape, as the adapters store ``tool_calls``."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_calls(message: Message) -> list[tuple[Any, Any, Any]]:
    """(id, name, arguments) of each OpenAI-shaped call in a message's ``tool_calls``."""
    stored = message.extra.get("tool_calls")
    found = []
    for call in stored if isinstance(stored, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            found.append((call.get("id"), function.get("name"), function.get("arguments")))
    return found


def calls(entry: MessageEntry) -> list[tuple[str, str, Any]]:
    """The tool calls a stored message makes: an openai-agents ``function_call``
    item, or OpenAI-shaped ``tool_calls``."""
    message = entry.message
    content = message.content
    if message.extra.get("openai_agents") == "item":
        if not isinstance(content, dict) or content.get("type") != "function_call":
            return []
        return [(str(content.get("call_id")), str(content.get("name")), content.get("arguments"))]
    return [(str(id_), str(name), args) for id_, name, args in openai_calls(message)]


def answers(entry: MessageEntry) -> list[str]:
    """The ids of the calls a stored message answers: a ``tool`` message's
    ``tool_call_id``, or a ``function_call_output`` item's ``call_id``."""
    message = entry.message
    content = message.content
    if isinstance(content, dict) and content.get("type") == "function_call_output":
        return [str(content.get("call_id"))]
    call_id = message.extra.get("tool_call_id")
    return [str(call_id)] if message.role == "tool" and call_id is not None else []


async def stored_call_key(
    store: SessionStore,
    session_id: str,
    conversation: str,
    call: tuple[str, str, Any],
    ranks: CallRanks,
) -> str:
    """The key of ``call`` (id, tool, arguments) in the turn ``session_id``
    stands in: the identical calls stored, and those ``ranks`` saw, rank first."""
    call_id, tool, args = call
    tail, whole = await read_tail(store, session_id, tells_the_turn)
    turn = open_turn(session_id, tail, whole=whole)
    assert turn is not None, "read_tail reads back to a user message or the start"
    wanted = digest(args)
    made = [entry for entry in turn.made if isinstance(entry, MessageEntry)]
    answered = {answered_id for entry in made for answered_id in answers(entry)}
    # A stored call with no stored output is one a crash cut (a loop that
    # stores each step stores the model's calls before they run). Once the
    # model was asked again (a later message holds calls), the cut call is
    # the one the new ask repeats under a new id: it no longer counts.
    asked: list[list[tuple[str, str, Any]]] = [list(calls(entry)) for entry in made]
    last_ask = max((at for at, made_calls in enumerate(asked) if made_calls), default=-1)
    stored = [
        stored_id
        for at, made_calls in enumerate(asked)
        for stored_id, name, stored_args in made_calls
        if (stored_id in answered or at == last_ask)
        and name == tool
        and digest(arguments(stored_args)) == wanted
    ]
    rank = ranks.rank((turn.anchor, tool, wanted), call_id, stored)
    return turn_key(conversation, turn.anchor, tool, args, rank)
