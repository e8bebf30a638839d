"""What an effect's lines say (`sessionstore.effects`): where one key stands
for `EffectLog.once` and `EffectLog.settle`, and where every effect stands
for `EffectLog.read`.

An effect's lines, in the order written: an ``intent`` starts a run of it;
``retry`` lines follow the attempts of that run that raised; its outcome
(``done``, ``failed``) ends it. A run that ends in none is in doubt: a run of
``once`` that finds it so records a ``doubt``, and, when more of its runs
were found in doubt than allowed, a ``dead-letter`` instead. An operator
settles one in doubt or dead-lettered (``done``, ``failed``, ``not-done``:
run it again). A ``forgotten`` line (a prune) ends the key's history: what
came before it no longer counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final, Literal, TypeAlias

from sessionstore.errors import InvalidRecordError
from sessionstore.models import Effect
from sessionstore.wire import decode_effect

__all__ = [
    "DOUBTFUL",
    "EffectState",
    "Found",
    "Keyed",
    "State",
    "StateFold",
    "drifted",
    "find_key",
    "forgotten",
    "moved",
    "not_finished",
    "unsettled",
]

Keyed: TypeAlias = dict[str, list[bytes]]
"""Lines by key, as `EffectLines.keyed` gives them."""

State = Literal["done", "failed", "in doubt", "not done", "dead letter"]

DOUBTFUL: Final = frozenset({"intent", "retry", "doubt"})
"""The line kinds after which an effect is in doubt: a run started and never ended."""


@dataclass
class Found:
    """What the log holds of one key since it was last forgotten.

    Attributes:
        intent: its first intent (what a conflict is checked against).
        take: its last intent (the run in doubt, when it is).
        last: its last line.
        anchor: its last line other than a ``doubt``: the run the finds are of.
        found: how many of its runs were found in doubt since it was last
            settled not done (finds of one run count once).
        seen: the run ``anchor`` belongs to was found in doubt already.
        lines: how many lines the log holds under the key, every one (those
            before a ``forgotten`` and those that do not decode included):
            with ``last``, what tells that nothing came since, exactly, where
            two runs may write the same line in the same instant.
        anchor_at: ``lines`` when ``anchor`` was the last line.
    """

    intent: Effect | None = None
    take: Effect | None = None
    last: Effect | None = None
    anchor: Effect | None = None
    found: int = 0
    seen: bool = False
    lines: int = 0
    anchor_at: int = 0

    @property
    def outcome(self) -> Effect | None:
        """Its last line when done or failed."""
        last = self.last
        return last if last is not None and last.effect in ("done", "failed") else None

    def add(self, effect: Effect) -> None:
        """Fold in the next line of the key (a ``forgotten`` one is the caller's)."""
        kind = effect.effect
        if kind == "intent":
            self.intent = self.intent or effect
            self.take, self.seen = effect, False
        elif kind in ("doubt", "dead-letter") and not self.seen:
            self.found, self.seen = self.found + 1, True
        elif kind == "not-done":
            self.found, self.seen = 0, False
        self.last = effect
        self.lines += 1
        if kind != "doubt":
            self.anchor, self.anchor_at = effect, self.lines


def find_key(key: str, keyed: Keyed) -> Found | None:
    """What the lines under ``key`` hold of it (None: nothing, or nothing since
    it was forgotten); a line that does not decode is no record."""
    found = Found()
    for line in keyed.get(key, ()):
        try:
            effect = decode_effect(line)
        except InvalidRecordError:
            found.lines += 1
            continue
        if effect.effect == "forgotten":
            found = Found(lines=found.lines + 1)
        else:
            found.add(effect)
    return None if found.last is None else found


def forgotten(key: str, keyed: Keyed) -> Effect | None:
    """The ``forgotten`` line that ends what ``key`` holds, when nothing came
    after it (None: never forgotten, or recorded again since)."""
    last = None
    for line in keyed.get(key, ()):
        try:
            effect = decode_effect(line)
        except InvalidRecordError:
            continue
        last = effect
    return last if last is not None and last.effect == "forgotten" else None


def moved(key: str, seen: Effect, lines: int, keyed: Keyed) -> Found | None:
    """What the log holds of ``key`` when a line came since it held ``lines``
    of them, the last ``seen`` (`Found.lines`, `Found.last`); None when none did."""
    found = find_key(key, keyed)
    if found is not None and (found.lines, found.last) == (lines, seen):
        return None
    return found or Found()


def drifted(key: str, anchor: Effect, at: int, held: list[Found], keyed: Keyed) -> Found | None:
    """What the log holds of ``key`` when it is no longer in doubt from the run
    ``anchor``, its line number ``at`` (`Found.anchor_at`): a line other than
    a ``doubt`` came since; None when it still is, ``held`` then given what
    the log holds (other runs' finds may have come since: what a line
    written now follows)."""
    found = find_key(key, keyed)
    last = None if found is None else found.last
    if (
        found is not None
        and (found.anchor_at, found.anchor) == (at, anchor)
        and last is not None
        and last.effect in DOUBTFUL
    ):
        held[:] = [found]
        return None
    return found or Found()


def unsettled(key: str, keyed: Keyed) -> Found | None:
    """None when ``key`` is in doubt or dead-lettered, else what the log holds
    of it: what a settle refuses."""
    found = find_key(key, keyed)
    last = None if found is None else found.last
    if last is not None and (last.effect in DOUBTFUL or last.effect == "dead-letter"):
        return None
    return found or Found()


_FINISHED: Final = frozenset({"done", "failed", "not-done"})


def not_finished(keys: list[str], finished: Callable[[str], bool], keyed: Keyed) -> set[str] | None:
    """The keys among ``keys`` whose last line is no outcome, or one that
    ``finished`` (given its time) refuses; None: none is (what a prune forgets)."""
    refused = set()
    for key in keys:
        found = find_key(key, keyed)
        last = None if found is None else found.last
        if last is None or last.effect not in _FINISHED or not finished(last.at):
            refused.add(key)
    return refused or None


@dataclass(frozen=True)
class EffectState:
    """Where an effect stands, as `EffectLog.read` lists it.

    Attributes:
        key: its key.
        state: ``done``, ``failed``, ``in doubt``, ``not done`` or
            ``dead letter`` (found in doubt too often: an operator settles it).
        tool: the tool's name.
        session: its session id, when it belongs to one.
        args: the digest of its arguments.
        started: when its first intent was written.
        finished: when its outcome was written (None when in doubt).
        error: a failure's error (or the operator's reason).
        size: bytes of its outcome line, 0 when in doubt.
        reason: why an operator settled it (None: it finished by itself).
        by: who settled it, when they said.
        attempts: the attempts started (each run's first, and each retry).
        found: how many of its runs were found in doubt (`Found.found`).
        last: when its last line was written (a find, a retry, an outcome).
    """

    key: str
    state: State
    tool: str | None
    session: str | None
    args: str | None
    started: str | None
    finished: str | None = None
    error: str | None = None
    size: int = 0
    reason: str | None = None
    by: str | None = None
    attempts: int = 0
    found: int = 0
    last: str | None = None


@dataclass
class _Held:
    """One key's state being folded, and what `Found` counts of it."""

    state: EffectState
    counts: Found = field(default_factory=Found)


_OUTCOMES: Final[dict[str, State]] = {"done": "done", "failed": "failed", "not-done": "not done"}


class StateFold:
    """Where every effect stands, its lines folded in one by one (`EffectLog.read`)."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def states(self) -> list[EffectState]:
        """Every effect, in the order started (a forgotten one not at all)."""
        return [held.state for held in self._held.values()]

    def add(self, line: bytes) -> None:
        """Fold in the next line of the log."""
        _fold(self._held, line)


def _fold(states: dict[str, _Held], line: bytes) -> None:
    try:
        effect = decode_effect(line)
    except InvalidRecordError:
        return  # a line torn by a crash: no record
    key, kind = effect.key, effect.effect
    if kind == "forgotten":
        states.pop(key, None)
        return
    held = states.get(key)
    if held is None:
        held = states[key] = _Held(EffectState(key, "in doubt", None, None, None, None))
    held.counts.add(effect)
    base = replace(held.state, found=held.counts.found, last=effect.at)
    if kind == "intent":
        if base.tool is None and base.started is None:
            base = replace(
                base, tool=effect.tool, session=effect.session, args=effect.args, started=effect.at
            )
        held.state = replace(
            base,
            state="in doubt",
            finished=None,
            error=None,
            size=0,
            reason=None,
            by=None,
            attempts=base.attempts + 1,
        )
    elif kind == "retry":
        held.state = replace(base, state="in doubt", attempts=base.attempts + 1)
    elif kind == "doubt":
        held.state = base
    elif kind == "dead-letter":
        held.state = replace(base, state="dead letter")
    else:
        failed = kind == "failed"
        held.state = replace(
            base,
            state=_OUTCOMES[kind],
            finished=effect.at,
            error=effect.error or (effect.reason if failed else None),
            size=len(line),
            reason=effect.reason,
            by=effect.by,
        )
