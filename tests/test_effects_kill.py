"""Side effects run through `EffectLog.once` by a worker killed (SIGKILL) at
random moments, then run again: each effect ran exactly once, or its key is
in doubt, and only where a kill fell between its intent and its outcome
(docs/effects.md)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from sessionstore import FileJournal, open_store
from sessionstore.effects import EffectState
from tests.helpers import ForkServer, killed_run
from tests.kinds import StoreTargets

WORKER = Path(__file__).parent / "workers" / "effect_runner.py"
KILLS = 32
KEYS = 150


@pytest.mark.parametrize("kind", ["file", "sqlite", "postgresql"])
async def test_killed_effects_run_once_or_are_in_doubt_where_the_kill_fell(
    kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    where = str(tmp_path / "agent") if kind == "file" else store_targets.new(kind)
    counter = tmp_path / "counter"
    args = ["file" if kind == "file" else "store", where, str(counter), str(KEYS)]
    async with ForkServer(WORKER) as server:
        cut = 0  # runs killed while they ran effects
        delay = 0.1  # a run that ends before its kill makes the next kill sooner,
        for _ in range(KILLS):  # so a machine's speed does not decide how many fall
            ended = "end" in await killed_run(server, args, delay)
            cut += not ended
            delay = delay / 2 if ended else delay
        printed = await killed_run(server, args, None)
        assert printed[-1] == "end"

    if kind == "file":
        states = await FileJournal.in_dir(where).effects.read()
    else:
        async with open_store(where) as store:
            states = await store.journal("agent").effects.read()
    by_key: dict[str, EffectState] = {state.key: state for state in states}
    runs = collections.Counter(counter.read_text().split()) if counter.exists() else {}
    assert sorted(by_key) == sorted(f"k{n}" for n in range(KEYS))  # every key started
    in_doubt = [key for key, state in by_key.items() if state.state == "in doubt"]
    for key, state in by_key.items():
        assert runs.get(key, 0) <= 1, f"{key} ran {runs[key]} times"
        if state.state == "done":
            assert runs.get(key, 0) == 1, f"{key} done, ran {runs.get(key, 0)} times"
        else:
            assert state.state == "in doubt", state
    # A kill leaves at most one effect between its intent and its outcome;
    # the last run, not killed, reports each of them and leaves no other.
    assert cut >= KILLS // 2, f"only {cut} kills fell among the effects"
    assert len(in_doubt) <= cut
    assert sorted(line.split()[1] for line in printed if line.startswith("doubt")) == sorted(
        in_doubt
    )
