"""The sealed part of the benchmark: what encryption at rest costs.

A SQLite store opened with ``keys=`` (docs/encryption.md) against the same
store plain, in the same run, each on a database of its own: an append of
one message to a session of 1,000; an agent's turn (one message appended,
then `load_context`, the context cached as a turn finds it); a first
`load_context` of 1,000 messages (nothing cached); a `load` of 100,000
entries (10,000 with --quick); and a search for a rare word. Both commit
at ``durability="normal"``, the default. The sealed store seals each line
(AES-256-GCM) as it appends, opens each one it reads, and indexes keyed
tokens of the words.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import count
from pathlib import Path

from messages import batches, entry
from results import Table, aper_call

from sessionstore import Message, MessageEntry, SessionMeta, SqlStore, generate_key

_KEY = generate_key()


async def _filled(where: Path, sealed: bool, entries: int) -> SqlStore:
    store = await SqlStore.open(str(where), keys=_KEY if sealed else None)
    for session_id, size in (("turns", 1_000), ("long", entries)):
        await store.create(SessionMeta(id=session_id))
        for batch in batches(size):
            await store.append_many(session_id, batch)
    rare = MessageEntry(
        id="rare", timestamp="2026-11-30T00:00:00+00:00", message=Message.user("zebra crossing")
    )
    await store.append("turns", rare)
    return store


def _work(store: SqlStore) -> dict[str, Callable[[], Awaitable[object]]]:
    numbers = count(10_000_000)

    async def append() -> None:
        await store.append("turns", entry(next(numbers)))

    async def turn() -> None:
        await store.append("turns", entry(next(numbers)))
        await store.load_context("turns")

    async def first_context() -> None:
        store.drop_caches()
        await store.load_context("turns")

    return {
        "append one message": append,
        "a turn: append, then load_context": turn,
        "first load_context, 1,000+ messages": first_context,
        "search for a rare word": lambda: store.search("zebra"),
    }


async def sealed(quick: bool, rounds: int) -> list[Table]:
    """The table: each operation sealed against plain."""
    entries = 10_000 if quick else 100_000
    table = Table("encryption at rest, SQLite", "sealed", "plain")
    times = 20 if quick else 200
    with tempfile.TemporaryDirectory(prefix="sessionstore-bench-sealed-") as where:
        stores = {
            sealed: await _filled(Path(where) / f"{sealed}.db", sealed, entries)
            for sealed in (True, False)
        }
        try:
            figures: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
            for _ in range(rounds):
                for kind, store in stores.items():  # interleaved: the same moment for both
                    for name, call in _work(store).items():
                        figures[kind].setdefault(name, []).append(await aper_call(call, times))
                    load = partial(store.load, "long")
                    figures[kind].setdefault(f"load, {entries:,} entries", []).append(
                        await aper_call(load, 1)
                    )
            for name in figures[True]:
                table.add(name, figures[True][name], figures[False][name])
        finally:
            for store in stores.values():
                await store.close()
    return [table]
