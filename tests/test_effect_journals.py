"""`sessionstore.effects_in_doubt` and `forget_effects`: effects across every
journal of a store, on every store kind and through the blocking facade
(docs/effects.md)."""

from __future__ import annotations

import contextlib

import pytest

from sessionstore import (
    EffectDeadLetterError,
    SessionStore,
    effects_in_doubt,
    forget_effects,
    open_store,
    sync,
)
from sessionstore.errors import ConfigurationError
from sessionstore.testing.effects_contract import Crash, crash
from tests.kinds import SEALED_KINDS, STORE_KINDS, StoreTargets


async def _three_journals(store: SessionStore) -> None:
    """``billing``: one in doubt, one dead-lettered; ``mailer``: one done, one
    in doubt; ``quiet``: one done."""
    mailer, billing = store.journal("mailer").effects, store.journal("billing").effects
    await mailer.once(lambda: "m-1", tool="send", session="chat-1", key="m1")
    with contextlib.suppress(Crash):
        await mailer.once(crash, tool="send", session="chat-1", key="m2")
    with contextlib.suppress(Crash):
        await billing.once(crash, tool="charge", session="chat-2", key="b1")
    for _ in range(2):
        with contextlib.suppress(Crash):
            await billing.once(crash, tool="charge", key="b2", idempotent=True, dead_letter=1)
    with pytest.raises(EffectDeadLetterError):
        await billing.once(crash, tool="charge", key="b2", idempotent=True, dead_letter=1)
    await store.journal("quiet").effects.once(lambda: 1, tool="count", key="q1")


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", [*STORE_KINDS, *SEALED_KINDS])
async def test_a_worker_gets_every_effect_in_doubt_of_every_journal(
    store_targets: StoreTargets, kind: str
) -> None:
    async with await open_store(store_targets.new(kind), **store_targets.options(kind)) as store:
        assert await effects_in_doubt(store) == []
        await _three_journals(store)
        found = await effects_in_doubt(store)
        assert [(f.journal, f.effect.key, f.effect.state) for f in found] == [
            ("billing", "b1", "in doubt"),
            ("billing", "b2", "dead letter"),
            ("mailer", "m2", "in doubt"),
        ]
        assert (found[0].effect.session, found[1].effect.found) == ("chat-2", 2)
        await store.journal("billing").effects.settle("b2", "not-done", reason="never charged")
        assert [f.effect.key for f in await effects_in_doubt(store)] == ["b1", "m2"]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_forgetting_across_journals_leaves_what_is_unfinished(
    store_targets: StoreTargets, kind: str
) -> None:
    async with await open_store(store_targets.new(kind)) as store:
        await _three_journals(store)
        with pytest.raises(ConfigurationError):
            await forget_effects(store, "2999-01-01", reason="")
        forgotten = await forget_effects(store, "2999-01-01", reason="30 days", by="ops")
        assert {name: [line.key for line in lines] for name, lines in forgotten.items()} == {
            "mailer": ["m1"],
            "quiet": ["q1"],
        }
        assert await store.journal("quiet").effects.read() == []
        assert len(await effects_in_doubt(store)) == 3  # nothing unfinished is forgotten
        assert await forget_effects(store, "2999-01-01", reason="again") == {}


def test_the_blocking_facade_asks_and_forgets_across_journals(store_targets: StoreTargets) -> None:
    with sync.open_store(store_targets.new("sqlite")) as store:
        store.run(_three_journals)
        found = sync.effects_in_doubt(store)
        assert [(f.journal, f.effect.key) for f in found] == [
            ("billing", "b1"),
            ("billing", "b2"),
            ("mailer", "m2"),
        ]
        forgotten = sync.forget_effects(store, "2999-01-01T00:00:00Z", reason="old", by="ops")
        assert sorted(forgotten) == ["mailer", "quiet"]
        assert store.journal("mailer").effects.find("m1") is None


def test_the_blocking_facade_retries_and_dead_letters(store_targets: StoreTargets) -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "sent"

    with sync.open_store(store_targets.new("sqlite")) as store:
        effects = store.journal("j").effects
        assert effects.once(flaky, tool="send", key="k", retries=2, backoff=0) == "sent"
        assert (len(calls), effects.find("k").attempts) == (3, 3)  # type: ignore[union-attr]
