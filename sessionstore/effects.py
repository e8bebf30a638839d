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

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Final, Literal, Protocol, TypeVar

from sessionstore.effect_lines import (
    EffectState,
    Found,
    Keyed,
    StateFold,
    drifted,
    find_key,
    forgotten,
    moved,
    not_finished,
    unsettled,
)
from sessionstore.effect_options import (
    BACKOFF_CAP,
    DEAD_LETTER_AFTER,
    Backoff,
    before_instant,
    check_options,
    delay,
    finished_before,
    forget_cutoff,
    pause,
    timed,
)
from sessionstore.effect_values import args_digest, kept_json, line_text
from sessionstore.errors import (
    ConfigurationError,
    EffectConflictError,
    EffectDeadLetterError,
    EffectFailedError,
    EffectInDoubtError,
    EffectNotInDoubtError,
    InvalidRecordError,
)
from sessionstore.models import Effect
from sessionstore.timestamps import Timestamp, now_rfc3339
from sessionstore.wire import encode

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


logger = logging.getLogger(__name__)

__all__ = [
    "BACKOFF_CAP",
    "DEAD_LETTER_AFTER",
    "EFFECTS_FILE",
    "EFFECTS_SUFFIX",
    "NOT_DONE",
    "SETTLED",
    "Backoff",
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
        retries: int = 0,
        backoff: Backoff = 1.0,
        timeout: float | None = None,  # noqa: ASYNC109 (an attempt's, as asyncio.timeout bounds it)
        dead_letter: int | None = DEAD_LETTER_AFTER,
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
            retries: how many times a call that raises an `Exception` is
                tried again (each failed attempt recorded as a ``retry`` line
                with its error); 0 records what it always did.
            backoff: seconds to wait before the attempt after attempt ``n``:
                a number ``b`` waits ``b * 2 ** (n - 1)``, at most
                `BACKOFF_CAP`; a function of ``n`` gives the seconds itself.
            timeout: seconds an attempt of an async call may take; one that
                takes longer is cancelled and recorded failed (a plain
                function is not interrupted).
            dead_letter: how many of the effect's runs may be found in doubt
                (each find recorded; finds of one run count once) before it
                is dead-lettered: `EffectDeadLetterError`, whatever ``check``
                or ``idempotent`` say, until an operator settles it; None:
                never.

        A settled effect is as the operator said: done returns its result,
        failed raises, not done runs it (for the first run to take the key).

        Returns:
            The result as the log keeps it, the same on every replay: a JSON
            value as its line reads back (an integer beyond 64 bits as a
            float), a pydantic model as its JSON form, anything else as text.

        Raises:
            EffectInDoubtError: the effect was started and never finished,
                and neither ``check`` nor ``idempotent`` was given;
                `EffectDeadLetterError`: it was dead-lettered.
            EffectFailedError: it failed before; the recorded error.
            EffectConflictError: the key names another tool or arguments.
            InvalidRecordError: ``args`` nest deeper than the wire allows
                (127 levels); nothing is written, the effect does not run.
            ConfigurationError: ``retries``, ``backoff``, ``timeout`` or
                ``dead_letter`` out of range; nothing is written.
            Whatever ``call`` raises, once its failure is recorded (an
            `Exception`, on its last attempt; anything else, a cancellation,
            leaves it in doubt).
        """
        key = effect_key(key, session, call_id)
        check_options(key, retries, backoff, timeout, dead_letter)
        try:
            digest = args_digest(args)
        except InvalidRecordError as exc:  # before anything is written
            where = f"effect {key!r}" + ("" if session is None else f" of session {session!r}")
            raise InvalidRecordError(f"{where}: args {exc}") from None
        intent = Effect(
            effect="intent", key=key, tool=tool, args=digest, session=session, at=now_rfc3339()
        )
        was_forgotten: list[Effect] = []

        def unless(keyed: Keyed) -> Found | None:
            found = find_key(key, keyed)
            line = forgotten(key, keyed) if found is None else None
            was_forgotten[:] = [] if line is None else [line]
            return found

        found = await self._journal.append_keyed_unless([key], unless, _line(intent))
        if was_forgotten:  # the operator's prune made it new: say so where it runs again
            (line,) = was_forgotten
            logger.warning(
                "effect %r (%s) in journal %s runs again: it was forgotten at %s (%s)",
                key,
                tool,
                self._name,
                line.at,
                line.reason or "no reason given",
            )
        if found is not None:
            recorded = found.intent
            if recorded is not None and (recorded.tool, recorded.args) != (tool, digest):
                raise EffectConflictError(
                    f"effect key {key!r} names {recorded.tool} with other arguments "
                    f"(digest {recorded.args}), not {tool} with these ({digest})"
                )
            if found.outcome is not None:
                return _recorded(found.outcome)
            if found.last is not None and found.last.effect != "not-done":
                found = await self._found_in_doubt(key, found, dead_letter)
                if found.outcome is not None:
                    return _recorded(found.outcome)
            last, lines = found.last, found.lines
            assert last is not None, "a key found has a line"
            if last.effect != "not-done":  # in doubt: ask the check, or run it again
                if check is not None:
                    result = await _called(check, found.take or last)
                    if result is not NOT_DONE:
                        return await self._done(key, result, None)
                elif not idempotent:
                    raise self._in_doubt(found.take or last)
            assert last is not None, "a key found has a line"
            # Take the key again, as only one of the runs resuming it may.
            again = intent.model_copy(update={"at": now_rfc3339()})
            while taken := await self._journal.append_keyed_unless(
                [key], partial(moved, key, last, lines), _line(again)
            ):  # another run resumed it first, or an operator settled it
                if taken.outcome is not None:
                    return _recorded(taken.outcome)
                if taken.last is None or taken.last.effect != "not-done":
                    raise self._stuck(taken, last)
                last, lines = taken.last, taken.lines  # settled not done meanwhile: again
        return await self._attempts(key, call, retries, backoff, timeout)

    async def _found_in_doubt(self, key: str, found: Found, dead_letter: int | None) -> Found:
        """Record that this run found ``key`` in doubt, or dead-letter it when
        too many of its runs were; what the log holds of it then (with an
        outcome, when one landed meanwhile).

        Raises:
            EffectDeadLetterError: it is, or is now, dead-lettered.
            EffectInDoubtError: another run took it up again meanwhile.
        """
        while True:
            last, anchor = found.last, found.anchor
            assert last is not None, "a key in doubt has a line"
            assert anchor is not None, "a key in doubt has a run"
            if last.effect == "dead-letter":
                raise self._dead(found)
            count = found.found + (0 if found.seen else 1)
            over = dead_letter is not None and count > dead_letter
            line = Effect(
                effect="dead-letter" if over else "doubt", key=key, found=count, at=now_rfc3339()
            )
            held: list[Found] = []
            refused = await self._journal.append_keyed_unless(
                [key], partial(drifted, key, anchor, found.anchor_at, held), _line(line)
            )
            if refused is None:
                (found,) = held  # with the finds of other runs written meanwhile
                found.add(line)
                if over:
                    raise self._dead(found)
                return found
            if refused.outcome is not None or refused.last is None:
                return refused if refused.outcome is not None else found
            if refused.last.effect not in ("dead-letter", "not-done"):
                raise self._stuck(refused, last)  # taken up again by another run
            if refused.last.effect == "not-done":
                return refused  # settled not done meanwhile: this run takes it
            found = refused

    async def _attempts(
        self,
        key: str,
        call: Callable[[], Any],
        retries: int,
        backoff: Backoff,
        limit: float | None,
    ) -> Any:
        """Run ``call``'s attempts (the key taken), recording each failure and the outcome."""
        counted = retries > 0  # with no retries, the lines are what they always were
        attempt = 1
        while True:
            try:
                if limit is None:
                    result = await _called(call)
                else:
                    result = await timed(call, limit, attempt)
            except Exception as exc:
                error = line_text(f"{type(exc).__name__}: {exc}")
                number = attempt if counted else None
                try:
                    wait = None if attempt > retries else delay(backoff, attempt)
                except Exception:  # a backoff that fails ends the retries: the effect failed
                    await self._failed(key, error, number)
                    raise
                if wait is None:
                    await self._failed(key, error, number)
                    raise
                retry = Effect(
                    effect="retry", key=key, attempt=attempt, error=error, at=now_rfc3339()
                )
                await self._append(retry)
                await pause(wait)
                attempt += 1
                continue
            return await self._done(key, result, attempt if counted else None)

    async def _failed(self, key: str, error: str, attempt: int | None) -> None:
        await self._append(
            Effect(effect="failed", key=key, error=error, attempt=attempt, at=now_rfc3339())
        )

    def _in_doubt(self, intent: Effect) -> EffectInDoubtError:
        return EffectInDoubtError(intent, journal=self._name, options=self._options)

    def _dead(self, found: Found) -> EffectDeadLetterError:
        intent = found.take or found.last
        assert intent is not None, "a dead-lettered key has a line"
        return EffectDeadLetterError(intent, found.found, journal=self._name, options=self._options)

    def _stuck(self, found: Found, last: Effect) -> EffectInDoubtError:
        """The error for a key another run holds (in doubt, or dead-lettered)."""
        if found.last is not None and found.last.effect == "dead-letter":
            return self._dead(found)
        return self._in_doubt(found.take or found.last or last)

    async def settle(
        self,
        key: str,
        outcome: Settled,
        *,
        reason: str,
        result: Any = None,
        by: str | None = None,
    ) -> Effect:
        """Settle an effect in doubt or dead-lettered as an operator found it in
        the world (``sessionstore journal NAME --settle KEY ...``), once the run
        that started it is gone (a later outcome would stand).

        The outcome is recorded with the time, ``reason`` and ``by``:
        ``done`` (later runs return ``result``), ``failed`` (they raise
        `EffectFailedError` with ``reason``) or ``not-done`` (the next run
        runs it, its count of runs found in doubt back to 0). The look and the
        write are one step, as `once`'s are.

        Args:
            key: the effect's key (as `read` and ``journal --in-doubt`` list it).
            outcome: ``done``, ``not-done`` or ``failed``.
            reason: why (what was found, and where), recorded.
            result: a ``done``'s result (any JSON value, or a pydantic model).
            by: who settles it, recorded.

        Returns:
            The line recorded.

        Raises:
            EffectNotInDoubtError: no effect ``key``, or it is neither in doubt
                nor dead-lettered (done, failed, or settled not done already).
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
        kept = kept_json(result) if outcome == "done" else None
        line = Effect(effect=outcome, key=key, result=kept, reason=reason, by=by, at=now_rfc3339())
        refused = await self._journal.append_keyed_unless(
            [key], partial(unsettled, key), _line(line)
        )
        if refused is not None:
            raise EffectNotInDoubtError(key, refused.last, journal=self._name)
        return line

    async def _done(self, key: str, result: Any, attempt: int | None) -> Any:
        kept = kept_json(result)
        done = Effect(effect="done", key=key, result=kept, attempt=attempt, at=now_rfc3339())
        await self._append(done)
        return kept

    async def _append(self, effect: Effect) -> None:
        await self._journal.append_raw(_line(effect))

    async def find(self, key: str) -> EffectState | None:
        """Where the effect ``key`` stands (None: never started, or forgotten),
        reading its lines alone."""
        fold = StateFold()
        for line in (await self._journal.keyed(key)).get(key, ()):
            fold.add(line)
        return next(iter(fold.states()), None)

    async def result(self, key: str) -> Any:
        """The recorded result of the effect ``key``.

        Raises:
            EffectInDoubtError, EffectFailedError: it has no result
                (`EffectDeadLetterError`: dead-lettered).
            KeyError: no such effect, or one settled not done (as if never
                run), or forgotten.
        """
        found = find_key(key, await self._journal.keyed(key))
        if found is None or found.last is None or found.last.effect == "not-done":
            raise KeyError(key)
        if found.outcome is None:
            raise self._stuck(found, found.last)
        return _recorded(found.outcome)

    async def read(self) -> list[EffectState]:
        """Every effect where it stands, in the order started (without results;
        a forgotten one not at all, until it runs again)."""
        fold = StateFold()
        rest = b""
        async for block in self._journal.read_blocks():
            pieces = (rest + block).split(b"\n")
            rest = pieces.pop()
            for piece in pieces:
                fold.add(piece)
        if rest:
            fold.add(rest)
        return fold.states()

    async def by_session(self) -> dict[str | None, list[EffectState]]:
        """`read`'s effects per session (None: of no session)."""
        found: dict[str | None, list[EffectState]] = {}
        for state in await self.read():
            found.setdefault(state.session, []).append(state)
        return found

    async def in_doubt(self) -> list[EffectState]:
        """The effects started and never finished: in doubt, or dead-lettered."""
        return [state for state in await self.read() if state.state in _UNRESOLVED]

    async def forget(
        self, before: str | datetime | Timestamp, *, reason: str, by: str | None = None
    ) -> list[Effect]:
        """Forget the effects that finished (done, failed, settled not done)
        before ``before``: a ``forgotten`` line each, with the time,
        ``reason`` and ``by``, so the prune itself stays recorded.

        A forgotten effect is as if it never ran: `read` no longer lists it,
        and **its key's next `once` runs the effect afresh**: forget only
        what no run will ask for again (a replay of a forgotten ``done``
        does it twice). Each batch of keys is one step under the journal's
        lock; an effect whose lines moved meanwhile is left as it is.

        Args:
            before: an RFC 3339 time with its offset, a date alone (its
                midnight UTC), an aware datetime or a `Timestamp`
                (`given_instant`).
            reason: why, recorded.
            by: who prunes, recorded.

        Returns:
            The lines recorded, one per effect forgotten.

        Raises:
            ConfigurationError: ``before`` is no time, or ``reason`` is empty.
        """
        cutoff = forget_cutoff(before, reason)
        old = [state.key for state in await self.read() if finished_before(state, cutoff)]
        forgotten: list[Effect] = []
        for at in range(0, len(old), _FORGET_BATCH):
            keys = old[at : at + _FORGET_BATCH]
            while keys:
                line = Effect(effect="forgotten", key="", reason=reason, by=by, at=now_rfc3339())
                lines = [line.model_copy(update={"key": key}) for key in keys]
                moved_keys = await self._journal.append_keyed_unless(
                    keys,
                    partial(not_finished, keys, partial(before_instant, cutoff)),
                    *map(_line, lines),
                )
                if moved_keys is None:
                    forgotten += lines
                    break
                keys = [key for key in keys if key not in moved_keys]
        return forgotten


_UNRESOLVED: Final = frozenset({"in doubt", "dead letter"})

_FORGET_BATCH: Final = 1000
"""Keys forgotten in one step."""
