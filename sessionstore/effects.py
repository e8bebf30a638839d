"""Effects: a journal of side effects, so that a resumed agent never repeats
what it already did (docs/effects.md).

An agent's tools send mail, charge cards, open tickets. After a crash the
framework replays the turn, and a tool would run twice. `EffectLog.once`
runs a side effect at most once per key: its *intent* (the key, the tool's
name, a digest of its arguments) is made durable before it runs, its
*outcome* (its result, or its error) after. Run again with the same key,
it returns the recorded result without running; an intent with no outcome
(a crash in between) is *in doubt*: `EffectInDoubtError`, unless the
caller gives a way to check (``check=``) or says the effect may run again
(``idempotent=True``).

Each journal keeps its effects in a journal of its own (`Effect` lines):
``<agent_dir>/session_effects.jsonl`` beside a `FileJournal`'s file, the
companion journal ``<name>/effects`` in a `SqlStore` or `MemoryStore` (no
journal name holds a ``/``). The Rust implementation's reader skips line
kinds it does not know, and its ``begin`` removes a journal that recorded
no write: effects in the session journal would be miscounted there, and
lost. Every append is durable before it returns (an ``fsync``, or a commit
with a full sync), whatever the store's durability; the look for a key and
the append of an intent are one step under the journal's lock, in any
thread or process (`JournalBase.append_unless`), so two runs of one key
never both start it. A journal's effects are erased with it, never cleared
with it: `clear` ends a session, and an effect's record must outlive the
session that ran it.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, Protocol, TypeVar

from pydantic import BaseModel

from sessionstore.errors import (
    EffectConflictError,
    EffectFailedError,
    EffectInDoubtError,
    InvalidRecordError,
)
from sessionstore.models import Effect
from sessionstore.timestamps import now_rfc3339
from sessionstore.wire import MAX_DEPTH, decode_effect, encode, encode_string, encode_value

_T = TypeVar("_T")


class EffectLines(Protocol):
    """What effects are kept in: a journal's lines (`JournalBase` gives it)."""

    async def append_raw(self, *lines: bytes) -> None: ...

    async def append_unless(
        self, found: Callable[[Iterator[bytes]], _T | None], *lines: bytes
    ) -> _T | None: ...

    async def read_bytes(self) -> bytes: ...

    def read_blocks(self) -> AsyncIterator[bytes]: ...


__all__ = [
    "EFFECTS_FILE",
    "EFFECTS_SUFFIX",
    "NOT_DONE",
    "EffectLines",
    "EffectLog",
    "EffectState",
    "effect_key",
]

EFFECTS_FILE = "session_effects.jsonl"
"""A file journal's effects, beside its ``session_journal.jsonl``."""

EFFECTS_SUFFIX = "/effects"
"""A store's journal ``name`` keeps its effects in the journal ``name + EFFECTS_SUFFIX``."""

NOT_DONE: Final = object()
"""What a ``check`` returns when the effect in doubt did not happen: it runs."""

State = Literal["done", "failed", "in doubt"]


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
    """``str(value)`` as a line can keep it: a lone surrogate (a file name
    decoded with ``os.fsdecode``) written as its escape; a value nested too
    deep for Python to print (a `RecursionError`) as a note saying so."""
    try:
        text = str(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to print>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _json(value: Any) -> Any:
    """A result as the log keeps it, and as a replay gives it back: a JSON
    value as reading its line gives it (an integer beyond 64 bits as a
    float), a pydantic model as its JSON form, anything else (or nested too
    deep to keep) as its text. Never raises: the effect has already run."""
    try:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        line = encode(Effect(effect="done", key="", result=value, at=""))
        return decode_effect(line).result  # as a replay reads it
    except (InvalidRecordError, ValueError):  # pydantic: "serialization depth exceeded"
        return _text(value)


def _canonical(value: Any, depth: int = 1) -> Any:
    """Arguments in a form whose JSON is the same in every process: a set
    in order, an integer beyond 64 bits and anything not JSON as text.

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
    """The digest an intent records of a call's arguments (SHA-256 of their
    JSON, in a form the same in every process: `_canonical`).

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
        state: ``done``, ``failed`` or ``in doubt`` (an intent with no outcome).
        tool: the tool's name.
        session: its session id, when it belongs to one.
        args: the digest of its arguments.
        started: when its intent was written.
        finished: when its outcome was written (None when in doubt).
        error: a failure's error.
        size: bytes of its outcome line (its result), 0 when in doubt.
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


@dataclass
class _Found:
    """What the log holds of one key: its first intent, its outcome if any,
    and its last line."""

    intent: Effect | None = None
    outcome: Effect | None = None
    last: Effect | None = None


def _needle(key: str) -> bytes:
    """The bytes every line of ``key`` holds: only those lines are decoded."""
    return ('"key":' + encode_string(key)).encode()


def _find(key: str, lines: Iterator[bytes]) -> _Found | None:
    """What ``lines`` hold of ``key`` (None: nothing). A line that does not
    decode (torn by a crash) is no record."""
    needle, found = _needle(key), None
    for line in lines:
        if needle not in line:
            continue
        try:
            effect = decode_effect(line)
        except InvalidRecordError:
            continue
        if effect.key != key:
            continue
        found = found or _Found()
        if effect.effect == "intent":
            found.intent = found.intent or effect
        else:
            found.outcome = effect
        found.last = effect
    return found


def _moved(key: str, seen: Effect, lines: Iterator[bytes]) -> _Found | None:
    """What the log holds of ``key`` when its last line is no longer
    ``seen`` (another run took the key meanwhile); None when it still is."""
    found = _find(key, lines)
    return None if found is not None and found.last == seen else found or _Found()


def _recorded(outcome: Effect) -> Any:
    """What a recorded outcome gives a run: its result, or its failure again.

    Raises:
        EffectFailedError: the outcome is a failure.
    """
    if outcome.effect == "failed":
        raise EffectFailedError(outcome)
    return outcome.result


def _line(effect: Effect) -> bytes:
    return encode(effect).encode()


async def _called(call: Callable[..., Any], *args: Any) -> Any:
    result = call(*args)
    return await result if inspect.isawaitable(result) else result


class EffectLog:
    """A journal's effects: `once`, and what `read` lists.

    Args:
        journal: the journal the effects are kept in (a journal's companion,
            `SessionJournal.effects` gives it).
    """

    def __init__(self, journal: EffectLines) -> None:
        self._journal = journal

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
                happened: what it returns is recorded as the result, and
                returned; `NOT_DONE` runs the effect, if this run is the
                first to take the key up again (the others raise
                `EffectInDoubtError`).
            idempotent: an effect in doubt runs again (it may: running it
                twice does no harm).

        Returns:
            The effect's result as the log keeps it, the same on the first
            run and on every replay: a JSON value as its line reads back
            (an integer beyond 64 bits as a float), a pydantic model as its
            JSON form, anything else (a value nested too deep) as its text.

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
        found = await self._journal.append_unless(partial(_find, key), _line(intent))
        if found is not None:
            recorded = found.intent
            if recorded is not None and (recorded.tool, recorded.args) != (tool, digest):
                raise EffectConflictError(
                    f"effect key {key!r} names {recorded.tool} with other arguments "
                    f"(digest {recorded.args}), not {tool} with these ({digest})"
                )
            if found.outcome is not None:
                return _recorded(found.outcome)
            assert recorded is not None, "a key with neither intent nor outcome is not found"
            if check is not None:
                result = await _called(check, recorded)
                if result is not NOT_DONE:
                    return await self._done(key, result)
            elif not idempotent:
                raise EffectInDoubtError(recorded)
            # Take the key again, as only one of the runs resuming it may.
            again = intent.model_copy(update={"at": now_rfc3339()})
            assert found.last is not None
            taken = await self._journal.append_unless(
                partial(_moved, key, found.last), _line(again)
            )
            if taken is not None:  # another run resumed it first
                if taken.outcome is not None:
                    return _recorded(taken.outcome)
                raise EffectInDoubtError(taken.last or recorded)
        try:
            result = await _called(call)
        except Exception as exc:
            error = _text(f"{type(exc).__name__}: {exc}")
            await self._append(Effect(effect="failed", key=key, error=error, at=now_rfc3339()))
            raise
        return await self._done(key, result)

    async def _done(self, key: str, result: Any) -> Any:
        kept = _json(result)
        await self._append(Effect(effect="done", key=key, result=kept, at=now_rfc3339()))
        return kept

    async def _append(self, effect: Effect) -> None:
        await self._journal.append_raw(_line(effect))

    async def find(self, key: str) -> EffectState | None:
        """Where the effect ``key`` stands (None: never started)."""
        for state in await self.read():
            if state.key == key:
                return state
        return None

    async def result(self, key: str) -> Any:
        """The recorded result of the effect ``key``.

        Raises:
            EffectInDoubtError, EffectFailedError: it has no result.
            KeyError: no such effect.
        """
        found = _find(key, _lines(await self._journal.read_bytes()))
        if found is None:
            raise KeyError(key)
        if found.outcome is None:
            assert found.intent is not None
            raise EffectInDoubtError(found.intent)
        return _recorded(found.outcome)

    async def read(self) -> list[EffectState]:
        """Every effect, in the order they were started, with where each
        stands; results are not kept (`result` reads one)."""
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
        """`read`'s effects, per session (None: those of no session), each
        session's in the order they started."""
        found: dict[str | None, list[EffectState]] = {}
        for state in await self.read():
            found.setdefault(state.session, []).append(state)
        return found

    async def in_doubt(self) -> list[EffectState]:
        """The effects started and never finished."""
        return [state for state in await self.read() if state.state == "in doubt"]


def _lines(data: bytes) -> Iterator[bytes]:
    return iter(data.split(b"\n"))


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
        return
    base = held or EffectState(effect.key, "in doubt", None, None, None, None)
    states[effect.key] = EffectState(
        base.key,
        "done" if effect.effect == "done" else "failed",
        base.tool,
        base.session,
        base.args,
        base.started,
        effect.at,
        effect.error,
        len(line),
    )
