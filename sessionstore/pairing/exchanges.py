"""What a walk over a list of messages finds, and the pieces every dialect's
repair is made of. `sessionstore.context` is where these are used."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sessionstore.models import Message

__all__ = [
    "INTERRUPTED_RESULT",
    "SYNTHETIC_FIELD",
    "Exchanges",
    "Orphan",
    "PairingProblem",
    "Rules",
    "changed",
    "made",
    "string",
]

PairingProblem = Literal["missing_result", "missing_call", "misplaced_result", "duplicate_result"]
"""What is wrong with one half of a tool exchange; see `Orphan`."""

SYNTHETIC_FIELD = "sessionstore_synthetic"
"""The extra field, ``True``, of every message `repair_pairing` made or changed:
drop it before storing a repaired list, or sending one to an API that refuses it."""

INTERRUPTED_RESULT = "The tool call was interrupted: it never returned a result."
"""The text of the results `repair_pairing` makes up for calls that never got one."""


@dataclass(frozen=True)
class Orphan:
    """One half of a tool exchange that the model API would refuse.

    Attributes:
        index: the position, in the list checked, of the message at fault:
            the one holding the call for ``"missing_result"``, the one
            holding the result otherwise.
        call_id: the call's id; None for a result that names no call id.
        problem: ``"missing_result"``, a call that got no result (a crash
            mid-turn); ``"missing_call"``, a result whose call is nowhere in
            the list (a cut); ``"misplaced_result"``, a result whose call is
            in the list, but not where the API wants it (after another
            message, before its call, or behind other content);
            ``"duplicate_result"``, a further result for an answered call.
    """

    index: int
    call_id: str | None
    problem: PairingProblem

    def __str__(self) -> str:
        what = {
            "missing_result": "call {} got no result",
            "missing_call": "result for {} has no call",
            "misplaced_result": "result for {} is not where its call wants it",
            "duplicate_result": "result for {} repeats one its call already got",
        }[self.problem]
        return f"message {self.index}: " + what.format(repr(self.call_id))


@dataclass
class Exchanges:
    """What a walk over a list of messages found.

    Attributes:
        orphans: every orphan, by message index once `done`.
        pairs: (call index, result index) of every result that answers its
            call, in the right message or not.
    """

    orphans: list[Orphan] = field(default_factory=list)
    pairs: list[tuple[int, int]] = field(default_factory=list)

    def stray(self, index: int, call_id: str | None, calls: set[str], answered: set[str]) -> None:
        """Note a result, in message ``index``, outside its call's exchange."""
        problem: PairingProblem = (
            "duplicate_result"
            if call_id in answered
            else "misplaced_result"
            if call_id in calls
            else "missing_call"
        )
        self.orphans.append(Orphan(index, call_id, problem))

    def done(self) -> None:
        """Put the orphans in message order (those of one message as found)."""
        self.orphans.sort(key=lambda orphan: orphan.index)


@dataclass(frozen=True)
class Rules:
    """A dialect: how to walk a list of messages, and how to repair one."""

    exchanges: Callable[[Sequence[Message]], Exchanges]
    repair: Callable[[Sequence[Message]], list[Message]]


def changed(message: Message, content: Any) -> Message:
    """``message`` with another content, marked as changed by a repair."""
    return message.model_copy(update={"content": content, SYNTHETIC_FIELD: True})


def made(role: str, content: Any, **fields: Any) -> Message:
    """A message a repair made up, marked as such."""
    return Message(role=role, content=content, **fields, **{SYNTHETIC_FIELD: True})


def string(value: Any) -> str | None:
    """``value`` when it is a string (an id), else None."""
    return value if isinstance(value, str) else None
