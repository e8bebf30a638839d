"""`sessionstore.effects` beyond the contract: digests the same in every
process, and the blocking facade's calls (docs/effects.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from sessionstore import Effect, EffectConflictError, EffectFailedError
from sessionstore.effects import args_digest
from sessionstore.errors import ConfigurationError
from sessionstore.sync import open_store
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

    with open_store("memory://") as store:
        effects = store.journal("j").effects
        assert effects.once(send, tool="send", key="k") == "sent"
        assert effects.once(send, tool="send", key="k") == "sent"
        assert len(ran) == 1
        with pytest.raises(EffectConflictError):
            effects.once(send, tool="send", args={"other": 1}, key="k")


def test_an_effect_that_exits_reaches_the_caller_and_is_left_in_doubt() -> None:
    def leave() -> None:
        sys.exit(3)

    with open_store("memory://") as store:
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

    with open_store("memory://") as store:
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
