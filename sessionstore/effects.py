"""Effects: a journal of side effects, so that a resumed agent never repeats
what it already did (docs/effects.md).

`EffectLog.once` makes an effect's *intent* durable before it runs and its
*outcome* after; run again with its key, it returns the recorded result. An
intent with no outcome is *in doubt* until a ``check``, ``idempotent=True``
or an operator's `EffectLog.settle` says what happened. Effects live in a
journal of their own beside their journal's (the Rust reader would miscount
them), keyed lines found through its index, never cleared with it.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final, Literal, Protocol, TypeVar

from pydantic import BaseModel

from sessionstore.errors import (
    ConfigurationError,
    EffectConflictError,
    EffectFailedError,
    EffectInDoubtError,
    EffectNotInDoubtError,
    InvalidRecordError,
)
from sessionstore.models import Effect
from sessionstore.timestamps import now_rfc3339
from sessionstore.wire import MAX_DEPTH, decode_effect, encode, encode_value

_T = TypeVar("_T")


class EffectLines(Protocol):
    """What effects are kept in: a journal's lines, found by key."""

    async def append_raw(self, *lines: bytes) -> None: ...

    async def keyed(self, *keys: str) -> dict[str, list[bytes]]: ...

    async def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[dict[str, list[bytes]]], _T | None],
        *lines: bytes,
    ) -> _T | None: ...

    async def read_bytes(self) -> bytes: ...

    def read_blocks(self) -> AsyncIterator[bytes]: ...


__all__ = [
    "EFFECTS_FILE",
    "EFFECTS_SUFFIX",
    "NOT_DONE",
    "SETTLED",
    "EffectLines",
    "EffectLog",
    "EffectState",
    "Settled",
    "args_digest",
    "effect_key",
]

EFFECTS_FILE = "session_effects.jsonl"
"""A file journal's effects, beside its ``session_journal.jsonl``."""

EFFECTS_SUFFIX = "/effects"
"""A store's journal ``name`` keeps its effects in the journal ``name + EFFECTS_SUFFIX``."""

NOT_DONE: Final = object()
"""What a ``check`` returns when the effect in doubt did not happen: it runs."""

State = Literal["done", "failed", "in doubt", "not done"]

Settled = Literal["done", "not-done", "failed"]

SETTLED: Final[tuple[Settled, ...]] = ("done", "not-done", "failed")
"""How an operator settles an effect in doubt (`EffectLog.settle`)."""


def effect_key(key: str | None, session: str | None, call_id: str | None) -> str:
    """The key of an effect: ``key``, or the session and the model's tool-call id.

    Raises:
        InvalidRecordError: neither is given.
    """
    if key is not None:
        return key
    if call_id is None:
        raise InvalidRecordError("an effect needs key=, or call_id= (with session=)")
    return call_id if session is None else f"{session}:{call_id}"


def _text(value: Any) -> str:
    """``str(value)`` as a line can keep it: a lone surrogate as its escape, a
    value nested too deep to print as a note saying so."""
    try:
        text = str(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to print>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _json(value: Any) -> Any:
    """A result as the log keeps it and a replay gives it back (`EffectLog.once`'s
    Returns). Never raises: the effect has already run."""
    try:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        line = encode(Effect(effect="done", key="", result=value, at=""))
        return decode_effect(line).result  # as a replay reads it
    except (InvalidRecordError, ValueError):  # pydantic: "serialization depth exceeded"
        return _text(value)


def _canonical(value: Any, depth: int = 1) -> Any:
    """Arguments as JSON the same in every process: a set sorted, an integer
    beyond 64 bits and anything not JSON as text.

    Raises:
        InvalidRecordError: they nest deeper than the wire allows.
    """
    if isinstance(value, BaseModel):
        try:
            value = value.model_dump(mode="json")
        except ValueError:  # pydantic: "serialization depth exceeded"
            raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(value, dict | list | tuple | set | frozenset) and depth > MAX_DEPTH:
        raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        return {_text(key): _canonical(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item, depth + 1) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_canonical(item, depth + 1) for item in value), key=encode_value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    return _text(value)


def args_digest(args: Any) -> str:
    """The digest an intent records of a call's arguments: SHA-256 of their
    JSON, the same in every process.

    Raises:
        InvalidRecordError: they nest deeper than the wire allows.
    """
    canonical = _canonical(args)
    try:
        text = encode_value(canonical)
    except InvalidRecordError:  # a float NaN: its text
        text = _text(args)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class EffectState:
    """Where an effect stands, as `EffectLog.read` lists it.

    Attributes:
        key: its key.
        state: ``done``, ``failed``, ``in doubt`` or ``not done``.
        tool: the tool's name.
        session: its session id, when it belongs to one.
        args: the digest of its arguments.
        started: when its intent was written.
        finished: when its outcome was written (None when in doubt).
        error: a failure's error (or the operator's reason).
        size: bytes of its outcome line, 0 when in doubt.
        reason: why an operator settled it (None: it finished by itself).
        by: who settled it, when they said.
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


@dataclass
class _Found:
    """What the log holds of one key: its first intent, its last line."""

    intent: Effect | None = None
    last: Effect | None = None

    @property
    def outcome(self) -> Effect | None:
        """Its last line when done or failed."""
        last = self.last
        return last if last is not None and last.effect in ("done", "failed") else None


def _find(key: str, keyed: dict[str, list[bytes]]) -> _Found | None:
    """What the lines under ``key`` hold of it (None: nothing); a line that
    does not decode is no record."""
    found = None
    for line in keyed.get(key, ()):
        try:
            effect = decode_effect(line)
        except InvalidRecordError:
            continue
        found = found or _Found()
        if effect.effect == "intent":
            found.intent = found.intent or effect
        found.last = effect
    return found


def _moved(key: str, seen: Effect, keyed: dict[str, list[bytes]]) -> _Found | None:
    """What the log holds of ``key`` when its last line is no longer ``seen``;
    None when it still is."""
    found = _find(key, keyed)
    return None if found is not None and found.last == seen else found or _Found()


def _unsettled(key: str, keyed: dict[str, list[bytes]]) -> _Found | None:
    """None when ``key`` is in doubt, else what the log holds of it: what a
    settle refuses."""
    found = _find(key, keyed)
    if found is not None and found.last is not None and found.last.effect == "intent":
        return None
    return found or _Found()


def _recorded(outcome: Effect) -> Any:
    """A recorded outcome's result; `EffectFailedError` for a failure."""
    if outcome.effect == "failed":
        raise EffectFailedError(outcome)
    return outcome.result


def _line(effect: Effect) -> bytes:
    return encode(effect).encode()


async def _called(call: Callable[..., Any], *args: Any) -> Any:
    result = call(*args)
    return await result if inspect.isawaitable(result) else result


class EffectLog:
    """A journal's effects: `once`, `settle`, and what `read` lists.

    Args:
        journal: the journal the effects are kept in (a journal's companion,
            `SessionJournal.effects` gives it).
        name: the name of the journal they belong to, for messages.
        options: the ``sessionstore`` options that open its store, for the
            commands an effect in doubt names; None when the command line
            cannot reach it (a memory store).
    """

    def __init__(
        self,
        journal: EffectLines,
        *,
        name: str | None = None,
        options: tuple[str, ...] | None = None,
    ) -> None:
        self._journal = journal
        self._name = name
        self._options = options

    def __repr__(self) -> str:
        return f"EffectLog({self._journal!r})"

    @property
    def lines(self) -> EffectLines:
        """Where the effects are kept, a line each (what an archive exports)."""
        return self._journal

    async def once(
        self,
        call: Callable[[], Awaitable[Any]] | Callable[[], Any],
        *,
        tool: str,
        args: Any = None,
        key: str | None = None,
        session: str | None = None,
        call_id: str | None = None,
        check: Callable[[Effect], Awaitable[Any]] | Callable[[Effect], Any] | None = None,
        idempotent: bool = False,
    ) -> Any:
        """Run a side effect at most once for its key, and return its result.

        Args:
            call: the effect (a function of no argument, plain or async).
            tool: its name, recorded.
            args: its arguments (any JSON value, or a pydantic model), of
                which a digest is recorded: the same key with other
                arguments is an `EffectConflictError`.
            key: what names the effect across runs; by default the session
                and ``call_id``, the model's tool-call id.
            session, call_id: see ``key``; ``session`` is recorded.
            check: for an effect in doubt, asked with its intent whether it
                happened: its answer is recorded and returned as the result;
                `NOT_DONE` runs the effect, if this run is the first to take
                the key up again (the others raise `EffectInDoubtError`).
            idempotent: an effect in doubt may run again.

        A settled effect is as the operator said: done returns its result,
        failed raises, not done runs it (for the first run to take the key).

        Returns:
            The result as the log keeps it, the same on every replay: a JSON
            value as its line reads back (an integer beyond 64 bits as a
            float), a pydantic model as its JSON form, anything else as text.

        Raises:
            EffectInDoubtError: the effect was started and never finished,
                and neither ``check`` nor ``idempotent`` was given.
            EffectFailedError: it failed before; the recorded error.
            EffectConflictError: the key names another tool or arguments.
            InvalidRecordError: ``args`` nest deeper than the wire allows
                (127 levels); nothing is written, the effect does not run.
            Whatever ``call`` raises, once its failure is recorded (an
            `Exception`; anything else, a cancellation, leaves it in doubt).
        """
        key = effect_key(key, session, call_id)
        try:
            digest = args_digest(args)
        except InvalidRecordError as exc:  # before anything is written
            where = f"effect {key!r}" + ("" if session is None else f" of session {session!r}")
            raise InvalidRecordError(f"{where}: args {exc}") from None
        intent = Effect(
            effect="intent", key=key, tool=tool, args=digest, session=session, at=now_rfc3339()
        )
        found = await self._journal.append_keyed_unless([key], partial(_find, key), _line(intent))
        if found is not None:
            recorded = found.intent
            if recorded is not None and (recorded.tool, recorded.args) != (tool, digest):
                raise EffectConflictError(
                    f"effect key {key!r} names {recorded.tool} with other arguments "
                    f"(digest {recorded.args}), not {tool} with these ({digest})"
                )
            last = found.last
            assert last is not None, "a key found has a line"
            if found.outcome is not None:
                return _recorded(found.outcome)
            if last.effect == "intent":  # in doubt (not settled not done)
                if check is not None:
                    result = await _called(check, last)
                    if result is not NOT_DONE:
                        return await self._done(key, result)
                elif not idempotent:
                    raise self._in_doubt(last)
            # Take the key again, as only one of the runs resuming it may.
            again = intent.model_copy(update={"at": now_rfc3339()})
            while taken := await self._journal.append_keyed_unless(
                [key], partial(_moved, key, last), _line(again)
            ):  # another run resumed it first, or an operator settled it
                if taken.outcome is not None:
                    return _recorded(taken.outcome)
                if taken.last is None or taken.last.effect == "intent":
                    raise self._in_doubt(taken.last or last)
                last = taken.last  # settled not done meanwhile: take it again
        try:
            result = await _called(call)
        except Exception as exc:
            error = _text(f"{type(exc).__name__}: {exc}")
            await self._append(Effect(effect="failed", key=key, error=error, at=now_rfc3339()))
            raise
        return await self._done(key, result)

    def _in_doubt(self, intent: Effect) -> EffectInDoubtError:
        return EffectInDoubtError(intent, journal=self._name, options=self._options)

    async def settle(
        self,
        key: str,
        outcome: Settled,
        *,
        reason: str,
        result: Any = None,
        by: str | None = None,
    ) -> Effect:
        """Settle an effect in doubt as an operator found it in the world
        (``sessionstore journal NAME --settle KEY ...``), once the run that
        started it is gone (a later outcome would stand).

        The outcome is recorded with the time, ``reason`` and ``by``:
        ``done`` (later runs return ``result``), ``failed`` (they raise
        `EffectFailedError` with ``reason``) or ``not-done`` (the next run
        runs it). The look and the write are one step, as `once`'s are.

        Args:
            key: the effect's key (as `read` and ``journal --in-doubt`` list it).
            outcome: ``done``, ``not-done`` or ``failed``.
            reason: why (what was found, and where), recorded.
            result: a ``done``'s result (any JSON value, or a pydantic model).
            by: who settles it, recorded.

        Returns:
            The line recorded.

        Raises:
            EffectNotInDoubtError: no effect ``key``, or it is not in doubt
                (done, failed, or settled not done already).
            ConfigurationError: an outcome not in `SETTLED`, an empty
                reason, or a result given to another outcome than ``done``.
        """
        if outcome not in SETTLED:
            raise ConfigurationError(
                f"an effect is settled done, not-done or failed, not {outcome!r}"
            )
        if not reason.strip():
            raise ConfigurationError(f"settling effect {key!r} needs a reason: what was found")
        if result is not None and outcome != "done":
            raise ConfigurationError(f"only an effect settled done has a result, not {outcome}")
        kept = _json(result) if outcome == "done" else None
        line = Effect(effect=outcome, key=key, result=kept, reason=reason, by=by, at=now_rfc3339())
        refused = await self._journal.append_keyed_unless(
            [key], partial(_unsettled, key), _line(line)
        )
        if refused is not None:
            raise EffectNotInDoubtError(key, refused.last, journal=self._name)
        return line

    async def _done(self, key: str, result: Any) -> Any:
        kept = _json(result)
        await self._append(Effect(effect="done", key=key, result=kept, at=now_rfc3339()))
        return kept

    async def _append(self, effect: Effect) -> None:
        await self._journal.append_raw(_line(effect))

    async def find(self, key: str) -> EffectState | None:
        """Where the effect ``key`` stands (None: never started), reading its lines alone."""
        states: dict[str, EffectState] = {}
        for line in (await self._journal.keyed(key)).get(key, ()):
            _take(states, line)
        return states.get(key)

    async def result(self, key: str) -> Any:
        """The recorded result of the effect ``key``.

        Raises:
            EffectInDoubtError, EffectFailedError: it has no result.
            KeyError: no such effect, or one settled not done (as if never run).
        """
        found = _find(key, await self._journal.keyed(key))
        if found is None or found.last is None or found.last.effect == "not-done":
            raise KeyError(key)
        if found.outcome is None:
            raise self._in_doubt(found.last)
        return _recorded(found.outcome)

    async def read(self) -> list[EffectState]:
        """Every effect where it stands, in the order started (without results)."""
        states: dict[str, EffectState] = {}
        rest = b""
        async for block in self._journal.read_blocks():
            pieces = (rest + block).split(b"\n")
            rest = pieces.pop()
            for piece in pieces:
                _take(states, piece)
        if rest:
            _take(states, rest)
        return list(states.values())

    async def by_session(self) -> dict[str | None, list[EffectState]]:
        """`read`'s effects per session (None: of no session)."""
        found: dict[str | None, list[EffectState]] = {}
        for state in await self.read():
            found.setdefault(state.session, []).append(state)
        return found

    async def in_doubt(self) -> list[EffectState]:
        """The effects started and never finished."""
        return [state for state in await self.read() if state.state == "in doubt"]


def _take(states: dict[str, EffectState], line: bytes) -> None:
    """Fold one line into where the effects stand."""
    try:
        effect = decode_effect(line)
    except InvalidRecordError:
        return  # a line torn by a crash: no record
    held = states.get(effect.key)
    if effect.effect == "intent":
        if held is None:
            states[effect.key] = EffectState(
                effect.key, "in doubt", effect.tool, effect.session, effect.args, effect.at
            )
        elif held.state == "not done":  # run again after it was settled not done
            states[effect.key] = replace(
                held, state="in doubt", finished=None, error=None, size=0, reason=None, by=None
            )
        return
    base = held or EffectState(effect.key, "in doubt", None, None, None, None)
    failed = effect.effect == "failed"
    states[effect.key] = EffectState(
        base.key,
        _STATES[effect.effect],
        base.tool,
        base.session,
        base.args,
        base.started,
        effect.at,
        effect.error or (effect.reason if failed else None),
        len(line),
        effect.reason,
        effect.by,
    )


_STATES: Final[dict[str, State]] = {"done": "done", "failed": "failed", "not-done": "not done"}
