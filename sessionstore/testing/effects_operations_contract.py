"""The effects contract in operation, as tests: retries, the dead letter and
forgetting (`EffectOperationsContract`), part of the journal contract
(`SessionJournalContract`) over the same ``journal_backend``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sessionstore.effects import NOT_DONE
from sessionstore.errors import (
    ConfigurationError,
    EffectDeadLetterError,
    EffectFailedError,
    EffectInDoubtError,
)
from sessionstore.models import Effect
from sessionstore.testing.common import JournalBackend
from sessionstore.testing.effects_contract import Crash, Tool, crash

_LONG_AGO = "2000-01-01T00:00:00Z"
_LATER = "2999-01-01T00:00:00Z"


class Flaky:
    """A side effect that raises ``fails`` times, then returns ``result``."""

    def __init__(self, fails: int, result: Any = "sent") -> None:
        self.runs = 0
        self.fails = fails
        self.result = result

    def __call__(self) -> Any:
        self.runs += 1
        if self.runs <= self.fails:
            raise ConnectionError(f"smtp down ({self.runs})")
        return self.result


@pytest.mark.asyncio
class EffectOperationsContract:
    """`EffectLog.once`'s retries and dead letter, and `EffectLog.forget`,
    on each journal backend."""

    async def test_a_call_that_raises_is_tried_again_each_attempt_recorded(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        waits: list[int] = []

        def backoff(attempt: int) -> float:
            waits.append(attempt)
            return 0

        send = Flaky(2)
        assert await effects.once(send, tool="send", key="k", retries=2, backoff=backoff) == "sent"
        assert (send.runs, waits) == (3, [1, 2])
        (state,) = await effects.read()
        assert (state.state, state.attempts, state.error) == ("done", 3, None)
        assert await effects.find("k") == state
        # A replay runs nothing, however many attempts it took.
        assert await effects.once(send, tool="send", key="k", retries=2, backoff=0) == "sent"
        assert send.runs == 3

    async def test_after_the_last_attempt_the_effect_is_failed_for_good(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        send = Flaky(5)
        with pytest.raises(ConnectionError, match=r"smtp down \(2\)"):
            await effects.once(send, tool="send", key="k", retries=1, backoff=0)
        assert send.runs == 2
        with pytest.raises(EffectFailedError, match=r"ConnectionError: smtp down \(2\)"):
            await effects.once(send, tool="send", key="k", retries=1, backoff=0)
        assert send.runs == 2
        (state,) = await effects.read()
        assert (state.state, state.attempts) == ("failed", 2)
        assert state.error == "ConnectionError: smtp down (2)"

    async def test_options_out_of_range_are_refused_before_anything_is_written(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        send = Tool()
        for options in ({"retries": -1}, {"backoff": -1.0}, {"dead_letter": 0}):
            with pytest.raises(ConfigurationError, match="effect 'k'"):
                await effects.once(send, tool="send", key="k", **options)
        assert (send.runs, await effects.read()) == (0, [])

    async def test_an_effect_whose_runs_keep_dying_is_dead_lettered_until_settled(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", key="k", dead_letter=2)
        for found in (1, 2):  # resumed, said idempotent: it runs again, and dies again
            with pytest.raises(Crash):
                await effects.once(crash, tool="charge", key="k", idempotent=True, dead_letter=2)
            assert (await effects.find("k")).found == found  # type: ignore[union-attr]
        asked: list[Effect] = []

        def check(intent: Effect) -> object:
            asked.append(intent)
            return NOT_DONE

        send = Tool("charged")
        with pytest.raises(EffectDeadLetterError, match="dead-lettered: 3 of its runs") as raised:
            await effects.once(send, tool="charge", key="k", check=check, dead_letter=2)
        assert isinstance(raised.value, EffectInDoubtError)
        # Dead-lettered, no run resolves it by itself, whatever it is given.
        for given in ({"check": check}, {"idempotent": True}, {"dead_letter": None}):
            with pytest.raises(EffectDeadLetterError):
                await effects.once(send, tool="charge", key="k", **given)
        assert (send.runs, asked) == (0, [])
        (state,) = await effects.in_doubt()
        assert (state.key, state.state, state.attempts, state.found) == ("k", "dead letter", 3, 3)
        with pytest.raises(EffectDeadLetterError):
            await effects.result("k")
        await effects.settle("k", "not-done", reason="never charged: run it", by="ops")
        assert await effects.once(send, tool="charge", key="k", dead_letter=2) == "charged"
        (state,) = await effects.read()
        assert (state.state, state.found, send.runs) == ("done", 0, 1)

    async def test_a_dead_lettered_effect_settled_done_gives_its_result(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", key="k", dead_letter=1)
        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", key="k", idempotent=True, dead_letter=1)
        with pytest.raises(EffectDeadLetterError):
            await effects.once(crash, tool="charge", key="k", idempotent=True, dead_letter=1)
        line = await effects.settle("k", "done", result={"id": 9}, reason="in the ledger")
        assert (line.effect, line.reason) == ("done", "in the ledger")
        assert await effects.once(crash, tool="charge", key="k") == {"id": 9}
        assert await effects.in_doubt() == []

    async def test_finds_of_one_run_count_once_and_each_is_recorded(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", key="k", dead_letter=1)
        for _ in range(4):  # workers finding the one run in doubt: never dead-lettered
            with pytest.raises(EffectInDoubtError) as raised:
                await effects.once(crash, tool="charge", key="k", dead_letter=1)
            assert not isinstance(raised.value, EffectDeadLetterError)
        (state,) = await effects.in_doubt()
        assert (state.state, state.found, state.attempts) == ("in doubt", 1, 1)
        assert state.last is not None
        assert state.started is not None
        assert state.last >= state.started  # the last find, recorded

    async def test_forgetting_finished_effects_records_it_and_their_keys_run_afresh(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        send = Tool("sent")
        await effects.once(send, tool="send", key="done")
        with pytest.raises(ConnectionError):
            await effects.once(Flaky(1), tool="send", key="failed")
        with pytest.raises(Crash):
            await effects.once(crash, tool="send", key="doubt")
        assert await effects.forget(_LONG_AGO, reason="nothing that old") == []
        forgotten = await effects.forget(_LATER, reason="older than 30 days", by="ops")
        assert sorted(line.key for line in forgotten) == ["done", "failed"]
        assert {(line.effect, line.reason, line.by) for line in forgotten} == {
            ("forgotten", "older than 30 days", "ops")
        }
        assert [state.key for state in await effects.read()] == ["doubt"]
        assert await effects.find("done") is None
        with pytest.raises(KeyError):
            await effects.result("done")
        assert await effects.forget(_LATER, reason="again") == []  # nothing left to forget
        # A forgotten key is as if never run: its next run runs it (another call too).
        assert await effects.once(send, tool="send", args={"to": "b"}, key="done") == "sent"
        assert send.runs == 2
        (state,) = [state for state in await effects.read() if state.key == "done"]
        assert (state.state, state.attempts) == ("done", 1)

    async def test_a_forgotten_effect_run_again_is_logged_as_such(
        self, journal_backend: JournalBackend, caplog: pytest.LogCaptureFixture
    ) -> None:
        effects = (await journal_backend.open()).effects
        send = Tool("sent")
        await effects.once(send, tool="send", key="k")
        await effects.forget(_LATER, reason="older than 30 days")
        with caplog.at_level(logging.WARNING, logger="sessionstore"):
            await effects.once(send, tool="send", key="k")
            await effects.once(send, tool="send", key="k")  # recorded again: a replay
            await effects.once(send, tool="send", key="new")
        assert send.runs == 3
        said = [record.getMessage() for record in caplog.records]
        assert len(said) == 1
        assert "effect 'k' (send)" in said[0]
        assert "runs again: it was forgotten at " in said[0]
        assert said[0].endswith("(older than 30 days)")

    async def test_forgetting_needs_a_time_and_a_reason(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        await effects.once(Tool(), tool="send", key="k")
        with pytest.raises(ConfigurationError, match="RFC 3339"):
            await effects.forget("last tuesday", reason="old")
        with pytest.raises(ConfigurationError, match="reason"):
            await effects.forget(_LATER, reason=" ")
        assert len(await effects.read()) == 1
