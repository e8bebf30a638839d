"""`sessionstore.effect_options`: the backoff between attempts, an attempt's
timeout, and the times a prune compares; and what lines a call's attempts
leave, on every journal kind."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from sessionstore import EffectFailedError, SessionStore
from sessionstore.effect_options import BACKOFF_CAP, before_instant, delay
from sessionstore.errors import ConfigurationError
from sessionstore.testing import JournalBackend
from sessionstore.timestamps import Timestamp, given_instant
from sessionstore.wire import decode_effect
from tests.kinds import JOURNAL_KINDS, StoreTargets


def test_a_numeric_backoff_doubles_up_to_its_cap() -> None:
    assert [delay(0.5, attempt) for attempt in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert delay(0.5, 10_000) == BACKOFF_CAP
    assert delay(0, 7) == 0.0


def test_a_backoff_function_is_given_the_attempt_and_must_give_seconds() -> None:
    assert delay(lambda attempt: attempt * 10, 3) == 30.0
    with pytest.raises(ConfigurationError, match=r"backoff\(2\) gave -1"):
        delay(lambda attempt: -1, 2)
    with pytest.raises(ConfigurationError, match="gave 'soon'"):
        delay(lambda attempt: "soon", 1)  # type: ignore[arg-type,return-value]


def test_times_compared_as_instants_whatever_their_form() -> None:
    cutoff = given_instant("2026-12-03")
    assert cutoff == Timestamp.from_datetime(datetime(2026, 12, 3, tzinfo=UTC))
    assert before_instant(cutoff, "2026-12-02T23:59:59.999999999+00:00")
    assert not before_instant(cutoff, "2026-12-03T01:00:00+01:00")  # midnight UTC: not before
    assert before_instant(cutoff, "2026-12-03T00:59:59+01:00")
    assert not before_instant(cutoff, "not a time")  # kept, never forgotten
    later = given_instant("2026-12-03T00:00:00.000000002Z")  # nanoseconds compared
    assert before_instant(later, "2026-12-03T00:00:00.000000001Z")
    with pytest.raises(ConfigurationError, match="needs an aware datetime"):
        given_instant(datetime(2026, 12, 3))


@pytest.fixture(params=JOURNAL_KINDS)
async def journal_backend(request: pytest.FixtureRequest, store_targets: StoreTargets):  # type: ignore[no-untyped-def]
    stores: list[SessionStore] = []
    yield await store_targets.journal_backend(request.param, stores)
    for store in stores:
        await store.close()


async def _kinds(backend: JournalBackend) -> list[tuple[str, int | None]]:
    journal = await backend.open()
    lines = (await journal.effects.lines.read_bytes()).splitlines()
    return [(effect.effect, effect.attempt) for effect in map(decode_effect, lines)]


@pytest.mark.asyncio
async def test_without_retries_the_lines_are_what_they_always_were(
    journal_backend: JournalBackend,
) -> None:
    effects = (await journal_backend.open()).effects
    await effects.once(lambda: "sent", tool="send", key="ok")

    def fail() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        await effects.once(fail, tool="send", key="bad", backoff=5)
    lines = [json.loads(line) for line in (await effects.lines.read_bytes()).splitlines()]
    assert [list(line) for line in lines] == [
        ["effect", "key", "tool", "args", "at"],
        ["effect", "key", "result", "at"],
        ["effect", "key", "tool", "args", "at"],
        ["effect", "key", "error", "at"],
    ]
    assert [line["effect"] for line in lines] == ["intent", "done", "intent", "failed"]
    assert lines[3]["error"] == "ConnectionError: down"


@pytest.mark.asyncio
async def test_an_attempt_that_takes_too_long_is_cut_and_recorded_failed(
    journal_backend: JournalBackend,
) -> None:
    effects = (await journal_backend.open()).effects
    started: list[int] = []

    async def slow_then_quick() -> str:
        started.append(1)
        if len(started) == 1:
            await asyncio.Event().wait()  # never ends by itself
        return "sent"

    result = await effects.once(
        slow_then_quick, tool="send", key="k", retries=1, backoff=0, timeout=0.05
    )
    assert (result, len(started)) == ("sent", 2)
    assert await _kinds(journal_backend) == [("intent", None), ("retry", 1), ("done", 2)]
    (state,) = await effects.read()
    assert (state.state, state.attempts) == ("done", 2)

    async def hangs() -> None:
        await asyncio.Event().wait()

    with pytest.raises(TimeoutError, match=r"attempt 1 took longer than 0\.01s"):
        await effects.once(hangs, tool="send", key="h", timeout=0.01)
    with pytest.raises(EffectFailedError, match="TimeoutError: attempt 1 took longer"):
        await effects.once(hangs, tool="send", key="h", timeout=0.01)
