"""The effects part of the benchmark: a replay's cost as the journal grows.

A replay is `EffectLog.once` of an effect already done: the framework
runs the turn again after a crash, and the tool is given its recorded
result without running; and `EffectLog.find`, where an effect stands.
Timed in a journal holding 100,000 effects against one holding 10, on each
backend: SQLite, a sealed SQLite store, JSONL,
memory, and PostgreSQL when ``SESSIONSTORE_PG_URL`` names a server. Each
journal is filled with the lines two runs of ``once`` write (an intent,
then its outcome), a thousand lines an append; the keys replayed are
spread over the whole journal. A replay looks its key up in the journal's
index of keys (docs/effects.md), so the ratio is about 1x: it costs what
the key holds, not what the journal holds.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from pathlib import Path

from results import Table, aper_call

from sessionstore import Effect, SessionStore, encode, generate_key, open_store
from sessionstore.effects import EffectLog, args_digest

SMALL, LARGE = 10, 100_000
_AT = "2026-12-03T00:00:00Z"
_KEY = generate_key()


def _never() -> None:
    raise AssertionError("a replay ran its effect again")


async def _filled(store: SessionStore, effects: int) -> EffectLog:
    """A new journal's effects: ``effects`` effects done, as ``once`` records them."""
    log = store.journal(f"bench-{uuid.uuid4().hex[:12]}").effects
    digest = args_digest(None)
    lines: list[bytes] = []
    for n in range(effects):
        key = f"call-{n:05}"
        intent = Effect(effect="intent", key=key, tool="mail", args=digest, at=_AT)
        done = Effect(effect="done", key=key, result={"sent": n}, at=_AT)
        lines += [encode(intent).encode(), encode(done).encode()]
    for at in range(0, len(lines), 1000):
        await log.lines.append_raw(*lines[at : at + 1000])
    return log


async def _replay(log: EffectLog, effects: int, times: int) -> float:
    """Seconds per replay of a done effect, its keys spread over the journal."""
    keys = itertools.cycle([f"call-{n:05}" for n in range(0, effects, max(1, effects // 50))])

    async def replay() -> None:
        await log.once(_never, tool="mail", key=next(keys))

    return await aper_call(replay, times)


async def _find(log: EffectLog, effects: int, times: int) -> float:
    """Seconds per `EffectLog.find` of a done effect, its keys spread over the journal."""
    keys = itertools.cycle([f"call-{n:05}" for n in range(0, effects, max(1, effects // 50))])

    async def find() -> None:
        assert await log.find(next(keys)) is not None

    return await aper_call(find, times)


async def effects(quick: bool, rounds: int) -> list[Table]:
    """The table: a replay and a find at `LARGE` effects against `SMALL`, per backend."""
    table = Table(
        f"effects: a replay (once of an effect done) and a find at {LARGE:,} effects"
        f" against {SMALL:,}",
        f"{LARGE:,} effects",
        f"{SMALL:,} effects",
    )
    times = 50 if quick else 200
    with tempfile.TemporaryDirectory(prefix="sessionstore-bench-effects-") as where:
        targets: dict[str, tuple[str, dict[str, object]]] = {
            "SQLite": (str(Path(where) / "plain.db"), {}),
            "SQLite, sealed": (str(Path(where) / "sealed.db"), {"keys": _KEY}),
            "JSONL": (str(Path(where) / "jsonl"), {}),
            "memory": ("memory://", {}),
        }
        url = os.environ.get("SESSIONSTORE_PG_URL")
        if url:
            targets["PostgreSQL"] = (url, {})
        else:
            print("\n(effects on PostgreSQL skipped: set SESSIONSTORE_PG_URL)")
        for kind, (target, options) in targets.items():
            async with await open_store(target, **options) as store:
                small, large = await _filled(store, SMALL), await _filled(store, LARGE)
                for work, timed in (("a replay", _replay), ("a find", _find)):
                    ours, theirs = [], []
                    for _ in range(rounds):  # interleaved: the same moment for both
                        ours.append(await timed(large, LARGE, times))
                        theirs.append(await timed(small, SMALL, times))
                    table.add(f"{kind}: {work}", ours, theirs)
    return [table]
