"""The collector part of the benchmark: what a whole load costs with the
host's garbage collector left as the host has it.

A store never touches the collector (it is process-wide: switched off
for one read, it would be off for every thread of the application). A
load builds a few objects an entry, so the collector's passes over them
are part of a large load's cost. Here each store loads one session of
100,000 messages whole, with the collector as Python starts it, against
the same load with the collector held off by the program around the call
(``gc.disable()``, what a store once did itself): the ratio is the cost
of leaving the host's collector alone. A turn never pays it: a context
and the adapters read only what was appended since their last call.

Runs memory, SQLite and JSONL.
"""

from __future__ import annotations

import gc
import shutil
import tempfile
import time
from pathlib import Path

from messages import batches
from results import Table

from sessionstore import SessionMeta, open_store


async def collector(quick: bool, rounds: int) -> list[Table]:
    """Each store's whole load with the collector on, against it held off."""
    count = 10_000 if quick else 100_000
    table = Table(
        f"The host's collector: a load of {count:,} messages with it on, and held off",
        "collector on",
        "held off",
    )
    work = Path(tempfile.mkdtemp(prefix="sessionstore-collector-"))
    targets = {
        "memory": "memory://",
        "sqlite": str(work / "collector.db"),
        "jsonl": f"jsonl://{work / 'collector'}",
    }
    was = gc.isenabled()
    try:
        for kind, target in targets.items():
            async with open_store(target) as store:
                session = await store.create(SessionMeta(id="long"))
                for batch in batches(count):
                    await store.append_many(session, batch)
                on: list[float] = []
                off: list[float] = []
                for _ in range(rounds):
                    for enabled, times in ((True, on), (False, off)):
                        store.drop_caches()
                        gc.collect()  # each load starts from the same heap
                        if not enabled:
                            gc.disable()
                        try:
                            start = time.perf_counter()
                            await store.load(session)
                            times.append(time.perf_counter() - start)
                        finally:
                            if was:
                                gc.enable()
                table.add(f"{kind}: load {count:,} messages", on, off)
    finally:
        shutil.rmtree(work)
    return [table]
