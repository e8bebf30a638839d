"""The chains of the forks part: a fork of a fork of a fork ..., 1,000 deep,
against one 10 deep.

Each chain is a SQLite store where session 0 holds a message and session
``n`` is a fork of session ``n - 1`` adding one message of its own: the
shape an agent retrying from its last turn leaves. On each chain, every
round times `summaries` of every session, what ``ls --tree`` reads (the
same by creation, and the heads), `integrity`, and an export of every
session into a new archive. The figures are per session, and for the
export per line written: each fork's file holds its whole history, so a
chain ``d`` deep exports about ``d * d / 2`` lines, and a line is the unit
of work. Flat (1.00x) is linear in depth; a cost a step per ancestor of
each session would show as a ratio near 100x.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from messages import entry
from results import Table

from sessionstore import SessionMeta, SessionStore, SqlStore
from sessionstore.archive import export_archive

DEPTHS = (10, 1_000)


async def chain(store: SessionStore, depth: int) -> int:
    """Fill ``store`` with a chain ``depth`` deep; the lines an export writes."""
    await store.create(SessionMeta(id="s0"))
    await store.append("s0", entry(0))
    for n in range(1, depth):
        await store.fork(f"s{n - 1}", meta=SessionMeta(id=f"s{n}"))
        await store.append(f"s{n}", entry(n))
    return sum(n + 2 for n in range(depth))  # a header and n + 1 entries each


async def _seconds(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def _tree(store: SessionStore) -> None:
    await store.summaries(order="created", limit=None)
    await store.heads()


async def _summaries(store: SessionStore) -> None:
    await store.summaries(limit=None)


async def _integrity(store: SessionStore) -> None:
    await store.integrity()


async def fork_chains(table: Table, fresh: Callable[[str], Path], rounds: int) -> None:
    """Add to ``table`` each operation's cost on the deepest chain against the
    shallowest (``fresh`` names new paths)."""

    async def export(store: SessionStore) -> None:
        await export_archive(store, fresh(".archive"))

    figures: dict[int, dict[str, list[float]]] = {}
    for depth in DEPTHS:
        async with await SqlStore.open(str(fresh(".db"))) as store:
            started = time.perf_counter()
            lines = await chain(store, depth)
            print(f"(forks: a chain {depth:,} deep built in {time.perf_counter() - started:.1f} s)")
            work: dict[str, tuple[Callable[[SessionStore], Awaitable[None]], int]] = {
                "summaries(limit=None), per session": (_summaries, depth),
                "ls --tree (summaries by creation, heads), per session": (_tree, depth),
                "integrity(), per session": (_integrity, depth),
                "export of every session, per line written": (export, lines),
            }
            figures[depth] = {name: [] for name in work}
            for _ in range(rounds):
                for name, (call, units) in work.items():
                    figures[depth][name].append(await _seconds(partial(call, store)) / units)
    deep, shallow = DEPTHS[-1], DEPTHS[0]
    for name in figures[deep]:
        table.add(name, figures[deep][name], figures[shallow][name])
