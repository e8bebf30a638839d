"""The effects contract as tests: `EffectsContract`, part of the journal
contract (`SessionJournalContract`) over the same ``journal_backend``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sessionstore.effects import NOT_DONE
from sessionstore.errors import (
    ConfigurationError,
    EffectConflictError,
    EffectFailedError,
    EffectInDoubtError,
    EffectNotInDoubtError,
    InvalidRecordError,
)
from sessionstore.journal import Journal, JournalSession
from sessionstore.models import Effect, SessionHeader
from sessionstore.testing.common import JournalBackend
from sessionstore.timestamps import Timestamp


class Crash(BaseException):
    """Stands for a process killed while its effect ran: not an `Exception`,
    so no failure is recorded and the effect is left in doubt."""


def crash() -> None:
    """An effect cut short: the process dies while it runs."""
    raise Crash


class Tool:
    """A side effect that counts its runs (from any thread)."""

    def __init__(self, result: Any = "sent") -> None:
        self.runs = 0
        self.result = result
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.runs += 1
        return self.result


async def until(condition: Callable[[], bool]) -> None:
    """Wait, on any loop, until ``condition`` holds (made true from any thread):
    an `asyncio.Event` belongs to one loop, and the sync facade runs a call's
    effect and check on its own."""
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(0.001)


@pytest.mark.asyncio
class EffectsContract:
    """Every rule of `EffectLog` (`sessionstore.effects`), on each journal backend."""

    async def test_an_effect_runs_once_and_its_result_is_given_back_after(
        self, journal_backend: JournalBackend
    ) -> None:
        send = Tool({"id": 7, "to": ["a@example.com"]})
        first = (await journal_backend.open()).effects
        args = {"to": "a@example.com", "body": "hi"}
        assert await first.once(send, tool="send", args=args, session="s", call_id="c1") == {
            "id": 7,
            "to": ["a@example.com"],
        }
        again = (await journal_backend.open()).effects  # another object: the same journal
        result = await again.once(send, tool="send", args=args, session="s", call_id="c1")
        assert result == {"id": 7, "to": ["a@example.com"]}
        assert send.runs == 1
        (state,) = await again.read()
        assert (state.key, state.state, state.tool, state.session) == ("s:c1", "done", "send", "s")
        assert state.finished is not None

    async def test_a_key_with_other_arguments_or_tool_is_a_conflict_and_never_runs(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        send = Tool()
        await effects.once(send, tool="send", args={"to": "a"}, key="k")
        with pytest.raises(EffectConflictError, match="'k'"):
            await effects.once(send, tool="send", args={"to": "b"}, key="k")
        with pytest.raises(EffectConflictError):
            await effects.once(send, tool="charge", args={"to": "a"}, key="k")
        assert send.runs == 1
        with pytest.raises(InvalidRecordError, match="key="):
            await effects.once(send, tool="send")

    async def test_a_failure_is_recorded_and_replayed_without_running(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        runs = []

        def fail() -> None:
            runs.append(1)
            raise ConnectionError("smtp down")

        with pytest.raises(ConnectionError, match="smtp down"):
            await effects.once(fail, tool="send", key="k")
        with pytest.raises(EffectFailedError, match="ConnectionError: smtp down") as raised:
            await effects.once(fail, tool="send", key="k")
        assert raised.value.outcome.error == "ConnectionError: smtp down"
        assert len(runs) == 1
        (state,) = await effects.read()
        assert (state.state, state.error) == ("failed", "ConnectionError: smtp down")

    async def test_an_effect_cut_short_is_in_doubt_until_checked_or_said_idempotent(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects

        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", args={"cents": 500}, session="s", key="k")
        send = Tool("charged")
        with pytest.raises(EffectInDoubtError, match="'k'") as raised:
            await effects.once(send, tool="charge", args={"cents": 500}, key="k")
        intent = raised.value.intent
        assert (intent.key, intent.tool, intent.session) == ("k", "charge", "s")
        assert [state.key for state in await effects.in_doubt()] == ["k"]
        seen: list[Effect] = []

        def not_done(intent: Effect) -> object:
            seen.append(intent)
            return NOT_DONE

        assert await effects.once(send, tool="charge", args={"cents": 500}, key="k", check=not_done)
        assert (send.runs, [effect.key for effect in seen]) == (1, ["k"])
        assert await effects.in_doubt() == []
        # Another in doubt, found done by the check: recorded, never run.
        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", key="k2")
        found = await effects.once(send, tool="charge", key="k2", check=lambda _: "found")
        assert (found, send.runs) == ("found", 1)
        assert await effects.once(send, tool="charge", key="k2") == "found"
        # Said idempotent: it runs again.
        with pytest.raises(Crash):
            await effects.once(crash, tool="charge", key="k3")
        assert await effects.once(send, tool="charge", key="k3", idempotent=True) == "charged"
        assert send.runs == 2
        states = {state.key: state.state for state in await effects.read()}
        assert states == {"k": "done", "k2": "done", "k3": "done"}
        sessions = await effects.by_session()
        assert {session: [s.key for s in held] for session, held in sessions.items()} == {
            "s": ["k"],
            None: ["k2", "k3"],
        }

    async def test_effects_outlive_clear_and_begin_and_go_with_erase(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        started = SessionHeader(started_at=Timestamp.parse("2026-12-02T10:00:00Z"), model="m")
        await journal.begin(started, Journal())
        send = Tool()
        await journal.effects.once(send, tool="send", key="k")
        assert await journal.read() == Journal(sessions=[JournalSession(header=started)])
        assert b"send" not in await journal.read_bytes()  # effects are kept apart
        await journal.clear()
        await journal.begin(started, await journal.read())
        assert await journal.effects.once(send, tool="send", key="k") == "sent"
        assert send.runs == 1
        assert await journal.erase(reason="asked") is not None
        assert await journal.effects.read() == []
        assert await journal.effects.once(send, tool="send", key="k") == "sent"
        assert send.runs == 2

    async def test_a_large_result_is_kept_whole(self, journal_backend: JournalBackend) -> None:
        effects = (await journal_backend.open()).effects
        big = "x" * 300_000 + "é\u2028\n"
        assert await effects.once(Tool(big), tool="fetch", key="k") == big
        assert await effects.once(Tool("other"), tool="fetch", key="k") == big
        assert await effects.result("k") == big
        (state,) = await effects.read()
        assert state.size > 300_000

    async def test_runs_resuming_one_effect_in_doubt_run_it_once(
        self, journal_backend: JournalBackend
    ) -> None:
        journals = [await journal_backend.open() for _ in range(4)]

        with pytest.raises(Crash):
            await journals[0].effects.once(crash, tool="charge", key="k")
        charge = Tool("charged")

        async def not_yet(intent: Effect) -> object:
            await asyncio.sleep(0.05)  # asks the payment service: every run hears "no"
            return NOT_DONE

        async def one(index: int) -> Any:
            try:
                effects = journals[index].effects
                return await effects.once(charge, tool="charge", key="k", check=not_yet)
            except EffectInDoubtError:  # another run took it up first
                return "in doubt"

        outcomes = await asyncio.gather(*(one(index) for index in range(len(journals))))
        assert charge.runs == 1
        assert "charged" in outcomes
        assert set(outcomes) <= {"charged", "in doubt"}
        assert await journals[0].effects.once(charge, tool="charge", key="k") == "charged"

    async def test_what_a_line_cannot_hold_is_kept_as_text_and_the_effect_done(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        deep: Any = "x"
        for _ in range(200):
            deep = [deep]
        name = "caf\udce9.txt"  # a file name os.fsdecode gave
        for key, value in (("deep", deep), ("surrogate", name), ("big", 2**70)):
            first = await effects.once(Tool(value), tool="t", key=key)
            assert await effects.once(Tool("other"), tool="t", key=key) == first
        assert await effects.once(Tool(), tool="t", key="surrogate") == "caf\\udce9.txt"

        def fail() -> None:
            raise OSError(f"no such file {name}")

        with pytest.raises(OSError, match="no such file"):
            await effects.once(fail, tool="t", key="error")
        with pytest.raises(EffectFailedError, match=r"caf\\udce9"):
            await effects.once(fail, tool="t", key="error")
        states = {state.key: state.state for state in await effects.read()}
        assert states == {"deep": "done", "surrogate": "done", "big": "done", "error": "failed"}

    @pytest.mark.parametrize("depth", [1_500, 100_000])
    async def test_a_result_too_deep_to_print_is_done_never_left_in_doubt(
        self, journal_backend: JournalBackend, depth: int
    ) -> None:
        effects = (await journal_backend.open()).effects
        deep: Any = "x"
        for _ in range(depth):  # past Python's recursion limit: no text of it either
            deep = [deep]
        tool = Tool(deep)
        first = await effects.once(tool, tool="t", key="deep", session="s")
        assert first == "<list nested too deep to print>"
        assert await effects.once(tool, tool="t", key="deep", session="s") == first
        assert tool.runs == 1
        assert [state.state for state in await effects.read()] == ["done"]

    @pytest.mark.parametrize("depth", [128, 1_500, 100_000])
    async def test_arguments_too_deep_are_refused_before_anything_is_written(
        self, journal_backend: JournalBackend, depth: int
    ) -> None:
        effects = (await journal_backend.open()).effects
        deep: Any = 0
        for _ in range(depth):
            deep = {"a": deep}
        tool = Tool()
        refusal = r"effect 's:c1' of session 's': args nested deeper than 127 levels"
        with pytest.raises(InvalidRecordError, match=refusal):
            await effects.once(tool, tool="t", args=deep, session="s", call_id="c1")
        loop: list[Any] = []
        loop.append(loop)
        with pytest.raises(InvalidRecordError, match="deeper than 127"):
            await effects.once(tool, tool="t", args={"loop": loop}, key="k")
        assert tool.runs == 0
        assert await effects.read() == []

    async def test_concurrent_runs_of_one_key_start_it_once(
        self, journal_backend: JournalBackend
    ) -> None:
        journals = [await journal_backend.open() for _ in range(8)]
        runs = Tool("done")

        async def one(index: int) -> Any:
            try:
                return await journals[index].effects.once(runs, tool="t", key="k")
            except EffectInDoubtError:  # looked while another ran it
                return "in doubt"

        for _ in range(3):
            outcomes = await asyncio.gather(*(one(index) for index in range(len(journals))))
            assert runs.runs == 1
            assert "done" in outcomes
            assert set(outcomes) <= {"done", "in doubt"}

    async def test_an_effect_settled_done_or_failed_is_never_run_again(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        with pytest.raises(Crash):
            await effects.once(crash, tool="send", args={"to": "a"}, session="s", key="k")
        # The operator found the mail in the sent folder.
        reason = "in the sent folder: message m-7"
        line = await effects.settle("k", "done", result={"id": "m-7"}, reason=reason, by="ada")
        assert (line.effect, line.result, line.reason, line.by) == (
            "done",
            {"id": "m-7"},
            reason,
            "ada",
        )
        send = Tool()
        again = (await journal_backend.open()).effects
        assert await again.once(send, tool="send", args={"to": "a"}, key="k") == {"id": "m-7"}
        assert send.runs == 0
        assert await again.result("k") == {"id": "m-7"}
        assert await again.in_doubt() == []
        (state,) = await again.read()
        assert (state.state, state.tool, state.session) == ("done", "send", "s")
        assert (state.reason, state.by, state.finished) == (reason, "ada", line.at)
        # Settled failed: it fails again, with the reason, and never runs.
        with pytest.raises(Crash):
            await again.once(crash, tool="charge", key="k2")
        await again.settle("k2", "failed", reason="the provider refused the card")
        with pytest.raises(EffectFailedError, match="settled failed: the provider refused"):
            await again.once(send, tool="charge", key="k2")
        assert send.runs == 0
        states = {state.key: (state.state, state.error) for state in await again.read()}
        assert states["k2"] == ("failed", "the provider refused the card")

    async def test_an_effect_settled_not_done_runs_on_its_next_run_once(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        with pytest.raises(Crash):
            await effects.once(crash, tool="send", key="k")
        await effects.settle("k", "not-done", reason="not in the sent folder")
        (state,) = await effects.read()
        assert (state.state, state.reason) == ("not done", "not in the sent folder")
        assert await effects.in_doubt() == []
        with pytest.raises(KeyError):
            await effects.result("k")
        send = Tool("sent")
        assert await effects.once(send, tool="send", key="k") == "sent"
        assert await effects.once(send, tool="send", key="k") == "sent"
        assert send.runs == 1
        (state,) = await effects.read()
        assert (state.state, state.reason) == ("done", None)
        # Run again and cut short again: in doubt again, and settled again.
        with pytest.raises(Crash):
            await effects.once(crash, tool="send", key="k2")
        await effects.settle("k2", "not-done", reason="not sent")
        with pytest.raises(Crash):
            await effects.once(crash, tool="send", key="k2")
        assert [state.key for state in await effects.in_doubt()] == ["k2"]
        await effects.settle("k2", "done", result="sent by hand", reason="sent it myself")
        assert await effects.once(send, tool="send", key="k2") == "sent by hand"
        assert send.runs == 1

    async def test_only_an_effect_in_doubt_is_settled(
        self, journal_backend: JournalBackend
    ) -> None:
        effects = (await journal_backend.open()).effects
        await effects.once(Tool(), tool="send", key="done")
        with pytest.raises(EffectNotInDoubtError, match="no effect 'nope'"):
            await effects.settle("nope", "done", reason="r")
        with pytest.raises(EffectNotInDoubtError, match=r"'done'.* is not in doubt: done at"):
            await effects.settle("done", "not-done", reason="r")
        with pytest.raises(Crash):
            await effects.once(crash, tool="send", key="k")
        for outcome, options in (
            ("maybe", {}),
            ("done", {"reason": " "}),
            ("failed", {"result": "x"}),
        ):
            with pytest.raises(ConfigurationError):
                await effects.settle("k", outcome, **{"reason": "r", **options})  # type: ignore[arg-type]
        await effects.settle("k", "not-done", reason="r")
        with pytest.raises(EffectNotInDoubtError, match=r"'k'.* not in doubt: not done at"):
            await effects.settle("k", "done", reason="r")
        states = {state.key: state.state for state in await effects.read()}
        assert states == {"done": "done", "k": "not done"}

    async def test_a_run_finding_the_effect_taken_up_again_asks_its_check_of_that_run(
        self, journal_backend: JournalBackend
    ) -> None:
        first, second = [(await journal_backend.open()).effects for _ in range(2)]
        with pytest.raises(Crash):
            await first.once(crash, tool="charge", key="k")
        world = Tool()  # the payment service: what was charged
        release = threading.Event()  # set from this loop, seen from any

        async def charge() -> str:
            world()
            await until(release.is_set)
            return "charged"

        asked: list[Effect] = []

        async def provider(intent: Effect) -> object:  # asks the payment service
            asked.append(intent)
            return "found" if world.runs else NOT_DONE

        taking = asyncio.create_task(first.once(charge, tool="charge", key="k", check=provider))
        await until(lambda: world.runs == 1)  # the first run took the key up: it runs
        assert [state.key for state in await second.in_doubt()] == ["k"]  # as if crashed
        assert await second.once(Tool(), tool="charge", key="k", check=provider) == "found"
        release.set()
        assert await taking == "charged"
        assert world.runs == 1
        assert [(intent.effect, intent.key) for intent in asked] == [("intent", "k")] * 2
        assert asked[1] != asked[0]  # asked of the intent of the run that took it up

    async def test_settles_racing_each_other_and_runs_resuming_the_effect_land_once(
        self, journal_backend: JournalBackend
    ) -> None:
        journals = [await journal_backend.open() for _ in range(6)]
        with pytest.raises(Crash):
            await journals[0].effects.once(crash, tool="charge", key="k")
        charge = Tool("charged")
        # The runs find the effect in doubt at once: each asks its check only
        # when none has yet taken the key up. A run that looked after another
        # took it up would find that live run's intent in doubt, and a check
        # answering "no" would run it again (docs/effects.md, In doubt).
        looking = [3]  # the runs yet to ask their check, or to end without one
        lock = threading.Lock()  # a check may run on another thread's loop (sync facade)

        def has_looked() -> None:
            with lock:
                looking[0] -= 1

        async def resume(index: int) -> Any:
            asked = False

            async def not_yet(intent: Effect) -> object:
                nonlocal asked
                asked = True
                has_looked()
                await until(lambda: looking[0] == 0)  # asks the payment service:
                return NOT_DONE  # every run hears "no"

            try:
                effects = journals[index].effects
                return await effects.once(charge, tool="charge", key="k", check=not_yet)
            except EffectInDoubtError:  # another run took it up first
                return "in doubt"
            finally:
                if not asked:  # a settle came first: it never asked
                    has_looked()

        async def settle(index: int) -> Any:
            try:
                effects = journals[index].effects
                await effects.settle("k", "done", result="found", reason="in the provider's log")
            except EffectNotInDoubtError:  # another settle, or a run, came first
                return "refused"
            return "settled"

        outcomes = await asyncio.gather(
            *(settle(index) for index in range(3)), *(resume(index) for index in range(3, 6))
        )
        settles, runs = outcomes[:3], outcomes[3:]
        assert charge.runs <= 1
        assert settles.count("settled") <= 1
        final = await journals[0].effects.once(charge, tool="charge", key="k")
        if charge.runs == 0:  # a settle came first: every run got its result
            assert settles.count("settled") == 1
            assert (set(runs), final) == ({"found"}, "found")
        else:
            assert set(runs) <= {"charged", "in doubt", "found"}
            assert final in ("charged", "found")
