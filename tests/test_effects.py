"""`sessionstore.effects` beyond the contract: digests the same in every
process, and the blocking facade's calls (docs/effects.md)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from sessionstore import (
    Effect,
    EffectConflictError,
    EffectFailedError,
    EffectInDoubtError,
    EffectLog,
    open_store,
)
from sessionstore.effect_lines import Found, drifted, moved
from sessionstore.effects import EffectLines, args_digest
from sessionstore.errors import ConfigurationError
from sessionstore.sync import open_store as open_blocking
from sessionstore.testing.effects_contract import Crash, crash
from sessionstore.wire import decode_effect, encode


def test_a_digest_is_the_same_in_every_process() -> None:
    script = (
        "from sessionstore.effects import args_digest\n"
        "print(args_digest({'to': {'ada@x', 'bob@x', 'cy@x', 'di@x'}, 'n': 2**70}))"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(digests) == 1  # a set's order, which the hash seed changes, is not digested
    assert args_digest({"n": 2**70}) != args_digest({"n": 2**70 + 1})


def test_the_blocking_facade_awaits_an_async_effect() -> None:
    ran = []

    async def send() -> str:
        ran.append(threading.current_thread().name)
        return "sent"

    with open_blocking("memory://") as store:
        effects = store.journal("j").effects
        assert effects.once(send, tool="send", key="k") == "sent"
        assert effects.once(send, tool="send", key="k") == "sent"
        assert len(ran) == 1
        with pytest.raises(EffectConflictError):
            effects.once(send, tool="send", args={"other": 1}, key="k")


def test_an_effect_that_exits_reaches_the_caller_and_is_left_in_doubt() -> None:
    def leave() -> None:
        sys.exit(3)

    with open_blocking("memory://") as store:
        effects = store.journal("j").effects
        with pytest.raises(SystemExit):
            effects.once(leave, tool="t", key="k")
        assert [state.state for state in effects.read()] == ["in doubt"]
        assert effects.once(lambda: "ok", tool="t", key="k", idempotent=True) == "ok"


def test_a_settled_outcome_is_a_line_with_its_reason_and_who() -> None:
    line = Effect(effect="not-done", key="k", reason="not sent", by="ada", at="t")
    text = '{"effect":"not-done","key":"k","reason":"not sent","by":"ada","at":"t"}'
    assert encode(line) == text
    assert decode_effect(text) == line
    done = Effect(effect="done", key="k", result=None, reason="found", at="t")
    assert encode(done) == '{"effect":"done","key":"k","result":null,"reason":"found","at":"t"}'


@pytest.mark.parametrize("backoff", [lambda n: -5, lambda n: 1 / 0], ids=["negative", "raises"])
def test_a_backoff_that_fails_leaves_the_effect_failed_not_in_doubt(backoff: object) -> None:
    # The attempt's failure is known: left in doubt, it waited for an operator.
    tries = []

    def flaky() -> str:
        tries.append(1)
        raise ConnectionError("smtp down")

    with open_blocking("memory://") as store:
        effects = store.journal("mailer").effects
        with pytest.raises((ConfigurationError, ZeroDivisionError)):
            effects.once(flaky, tool="send", key="k", retries=3, backoff=backoff)  # type: ignore[arg-type]
        (state,) = effects.read()
        assert (state.state, state.error, state.attempts) == (
            "failed",
            "ConnectionError: smtp down",
            1,
        )
        assert effects.in_doubt() == []
        with pytest.raises(EffectFailedError):
            effects.once(flaky, tool="send", key="k", retries=3, backoff=0)
    assert len(tries) == 1


class _Paused:
    """Effect lines whose first guarded append, once done, waits for ``go``:
    a run that has read its key and not yet written."""

    def __init__(self, lines: EffectLines) -> None:
        self._lines = lines
        self.read, self.go = asyncio.Event(), asyncio.Event()
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lines, name)

    async def append_keyed_unless(self, keys: Any, found: Any, *lines: bytes) -> Any:
        result = await self._lines.append_keyed_unless(keys, found, *lines)
        self._calls += 1
        if self._calls == 1:
            self.read.set()
            await self.go.wait()
        return result


async def test_runs_writing_the_same_lines_in_the_same_instant_take_a_key_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fixed clock: a run that takes a key in doubt again writes the very
    # intent that left it in doubt, byte for byte.
    monkeypatch.setattr("sessionstore.effects.now_rfc3339", lambda: "2026-12-07T00:00:00+00:00")
    async with await open_store("memory://") as store:
        lines = store.journal("j").effects.lines
        with pytest.raises(Crash):
            await EffectLog(lines).once(crash, tool="send", key="k")
        late = _Paused(lines)
        ran: list[str] = []
        running, release = asyncio.Event(), asyncio.Event()

        async def first() -> str:
            ran.append("first")
            running.set()
            await release.wait()
            return "sent"

        async def second() -> str:
            ran.append("second")
            return "sent twice"

        # The second run finds the key in doubt, then waits while the first
        # takes it up and runs.
        waiting = asyncio.create_task(
            EffectLog(late).once(second, tool="send", key="k", idempotent=True)
        )
        await late.read.wait()
        taking = asyncio.create_task(
            EffectLog(lines).once(first, tool="send", key="k", idempotent=True)
        )
        await running.wait()
        late.go.set()
        with pytest.raises(EffectInDoubtError):
            await waiting  # taken up by another run meanwhile: not run again
        release.set()
        assert (await taking, ran) == ("sent", ["first"])


def test_a_key_whose_last_line_came_again_has_moved() -> None:
    intent = Effect(effect="intent", key="k", tool="t", args="a", at="2026-12-07T00:00:00Z")
    not_done = Effect(effect="not-done", key="k", reason="r", at="2026-12-07T00:00:00Z")
    seen = {"k": [encode(intent).encode(), encode(not_done).encode()]}
    assert moved("k", not_done, 2, seen) is None
    again = {"k": [*seen["k"], *seen["k"]]}  # taken, run, settled not done: the same lines
    found = moved("k", not_done, 2, again)
    assert found is not None
    assert (found.last, found.lines) == (not_done, 4)
    doubt = Effect(effect="doubt", key="k", found=1, at="2026-12-07T00:00:00Z")
    held: list[Found] = []
    in_doubt = {"k": [seen["k"][0], encode(doubt).encode()]}
    assert drifted("k", intent, 1, held, in_doubt) is None  # found in doubt by another run
    assert [(f.last, f.lines) for f in held] == [(doubt, 2)]
    taken = {"k": [*again["k"][:3]]}  # the same intent, written again: taken up
    assert drifted("k", intent, 1, held, taken) is not None
