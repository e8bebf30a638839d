"""How `EffectLog.once` tries an effect again and when it gives up on one
(`sessionstore.effects`): retries, their backoff, an attempt's timeout, the
dead letter; and the times a prune compares (`EffectLog.forget`)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from sessionstore.errors import ConfigurationError
from sessionstore.timestamps import Timestamp, given_instant

if TYPE_CHECKING:
    from sessionstore.effect_lines import EffectState

__all__ = [
    "BACKOFF_CAP",
    "DEAD_LETTER_AFTER",
    "Backoff",
    "before_instant",
    "check_options",
    "delay",
    "finished_before",
    "forget_cutoff",
    "line_instant",
    "pause",
    "timed",
]

Backoff: TypeAlias = float | Callable[[int], float]
"""Seconds before the attempt after attempt ``n``: ``b * 2 ** (n - 1)`` for a
number ``b`` (at most `BACKOFF_CAP`), or what a function of ``n`` returns."""

BACKOFF_CAP: Final = 60.0
"""The longest wait between two attempts a numeric backoff makes, in seconds."""

DEAD_LETTER_AFTER: Final = 3
"""How many of an effect's runs may be found in doubt before the next find
dead-letters it (`EffectLog.once`'s ``dead_letter``)."""


def check_options(
    key: str, retries: int, backoff: Backoff, timeout: float | None, dead_letter: int | None
) -> None:
    """Refuse options out of range, before anything is written.

    Raises:
        ConfigurationError: naming the option and the effect.
    """
    where = f"effect {key!r}"
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(f"{where}: retries= is a count, 0 or more, not {retries!r}")
    if not callable(backoff) and (
        isinstance(backoff, bool)
        or not isinstance(backoff, int | float)
        or not math.isfinite(backoff)
        or backoff < 0
    ):
        raise ConfigurationError(
            f"{where}: backoff= is seconds (0 or more) or a function of the attempt, "
            f"not {backoff!r}"
        )
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not timeout > 0
        or not math.isfinite(timeout)
    ):
        raise ConfigurationError(f"{where}: timeout= is seconds, more than 0, not {timeout!r}")
    if dead_letter is not None and (
        isinstance(dead_letter, bool) or not isinstance(dead_letter, int) or dead_letter < 1
    ):
        raise ConfigurationError(
            f"{where}: dead_letter= is a count, 1 or more (None: never), not {dead_letter!r}"
        )


def delay(backoff: Backoff, attempt: int) -> float:
    """Seconds to wait after attempt ``attempt`` failed.

    Raises:
        ConfigurationError: a backoff function gave no number of seconds.
    """
    if not callable(backoff):
        return float(min(backoff * 2 ** min(attempt - 1, 64), BACKOFF_CAP))
    seconds = backoff(attempt)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise ConfigurationError(
            f"backoff({attempt}) gave {seconds!r}: a backoff gives seconds, 0 or more"
        )
    return float(seconds)


async def timed(call: Callable[[], Any], limit: float, attempt: int) -> Any:
    """``call``'s result, its awaiting cut after ``limit`` seconds.

    Raises:
        TimeoutError: it took longer (the message says which attempt);
            whatever ``call`` raises.
    """
    import asyncio  # loaded by a call given a timeout: not by `import sessionstore`

    try:
        async with asyncio.timeout(limit) as within:
            result = call()
            return await result if inspect.isawaitable(result) else result
    except TimeoutError:
        if within.expired():
            raise TimeoutError(f"attempt {attempt} took longer than {limit:g}s") from None
        raise


async def pause(seconds: float) -> None:
    """Wait ``seconds`` between two attempts (none: go on at once)."""
    if seconds > 0:
        import asyncio  # loaded by a call that waits: not by `import sessionstore`

        await asyncio.sleep(seconds)


def line_instant(text: str) -> datetime | None:
    """A line's time (``at``) as an aware datetime, nanoseconds cut to
    microseconds; None when it is no time a datetime holds."""
    try:
        return Timestamp.parse(text).to_datetime()
    except ValueError:
        return None


def before_instant(cutoff: Timestamp, stamp: str) -> bool:
    """Whether the line time ``stamp`` is before ``cutoff`` (a time that does
    not parse is not: it is kept)."""
    try:
        return Timestamp.parse(stamp) < cutoff
    except ValueError:
        return False


def finished_before(state: EffectState, cutoff: Timestamp) -> bool:
    """Whether the effect finished (done, failed, settled not done) before
    ``cutoff``: what `EffectLog.forget` forgets."""
    finished = state.finished
    return (
        state.state in ("done", "failed", "not done")
        and finished is not None
        and before_instant(cutoff, finished)
    )


def forget_cutoff(before: object, reason: str) -> Timestamp:
    """What a prune of effects checks before it touches a journal: ``before``
    as an instant (`given_instant`) and a ``reason`` that says why.

    Raises:
        ConfigurationError: ``before`` is no time, or ``reason`` is empty.
    """
    cutoff = given_instant(before, "before=")
    if not reason.strip():
        raise ConfigurationError("forgetting effects needs a reason: why they may go")
    return cutoff
