"""A fork of a fork of a fork ...: every operation costs in proportion to the
depth, never to its square.

Costs are counted, never timed: on SQL the statements run (a family of
``2d`` sessions may cost twice a family of ``d``; a read of one session the
same whatever its depth), on the memory store the lines decoded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from sessionstore import SessionMeta, SessionStore, open_store
from sessionstore.archive import export_archive, retire
from sessionstore.backends.records import decode_stored_entries
from sessionstore.backends.sql.query import Query
from sessionstore.errors import CorruptSessionError
from sessionstore.testing.common import compaction, message
from sessionstore.verify import verify_store
from sessionstore.wire.stored import read_stored_entry
from tests.kinds import StoreTargets

MEMORY = "sessionstore.backends.memory"

DEPTH = 12
"""The shorter chain; the longer is twice as deep."""


class Counter:
    """What an operation cost: statements run (SQL) or lines decoded (memory)."""

    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """Counts every statement the SQL store runs: its compiled statements on
    the driver's cursor, and those run through SQLAlchemy."""
    counter = Counter()
    cursor = Query._cursor

    def counted(self: Query, conn: Any) -> Any:
        counter.count += 1
        return cursor(self, conn)

    def executed(*_: Any) -> None:
        counter.count += 1

    monkeypatch.setattr(Query, "_cursor", counted)
    event.listen(Engine, "before_cursor_execute", executed)
    yield counter
    event.remove(Engine, "before_cursor_execute", executed)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts the entry lines the memory store decodes."""
    counter = Counter()

    def decode_all(session_id: str, lines: Any, **kwargs: Any) -> Any:
        found = decode_stored_entries(session_id, lines, **kwargs)
        counter.count += len(found)
        return found

    def decode_one(line: Any) -> Any:
        counter.count += 1
        return read_stored_entry(line)

    monkeypatch.setattr(f"{MEMORY}.decode_stored_entries", decode_all)
    monkeypatch.setattr(f"{MEMORY}.read_stored_entry", decode_one)
    return counter


def session(n: int) -> str:
    return f"s{n}"


async def chain(store: SessionStore, depth: int) -> str:
    """``depth`` sessions, each a fork of the one before adding a message; the
    deepest's id. Only the deepest is compacted: a summary of any other
    looks for a compaction through its whole history."""
    await store.create(SessionMeta(id=session(0)))
    await store.append(session(0), message("e0", "a"))
    for n in range(1, depth):
        await store.fork(session(n - 1), meta=SessionMeta(id=session(n)))
        await store.append(session(n), message(f"e{n}", "a"))
    await store.append(session(depth - 1), compaction("c", "sum", f"e{depth - 1}"))
    return session(depth - 1)


Operation = Callable[[SessionStore, int, Path], Awaitable[object]]


async def _drain(items: AsyncIterator[object]) -> None:
    async for _ in items:
        pass


async def _tree(store: SessionStore, depth: int, where: Path) -> None:
    # What `sessionstore ls --tree` reads.
    await store.summaries(order="created", limit=None)
    await store.heads()


FAMILY: dict[str, Operation] = {
    "summaries": lambda store, depth, where: store.summaries(limit=None),
    "tree": _tree,
    "integrity": lambda store, depth, where: store.integrity(),
    "verify": lambda store, depth, where: verify_store(store),
    "export": lambda store, depth, where: export_archive(store, where / "archive"),
    "retire": lambda store, depth, where: retire(
        store, where / "archive", sessions=[session(n) for n in range(depth)]
    ),
}
"""Operations over every session of the family."""

DEEPEST: dict[str, Operation] = {
    "load": lambda store, depth, where: store.load(session(depth - 1)),
    "iter_entries": lambda store, depth, where: _drain(store.iter_entries(session(depth - 1))),
    "raw_blocks": lambda store, depth, where: _drain(store.raw_blocks(session(depth - 1))),
    "fork": lambda store, depth, where: store.fork(
        session(depth - 1), meta=SessionMeta(id="another")
    ),
    # An entry its parent added: found in the second-to-last span.
    "fork at": lambda store, depth, where: store.fork(
        session(depth - 1), at=f"e{depth - 2}", meta=SessionMeta(id="another")
    ),
    "erase": lambda store, depth, where: store.erase(session(depth - 1), reason="test"),
}
"""Operations on the deepest fork alone."""


async def costs(
    kind: str, targets: StoreTargets, counter: Counter, operation: Operation, tmp: Path
) -> dict[int, int]:
    """What ``operation`` cost on chains ``DEPTH`` and twice as deep."""
    found = {}
    for depth in (DEPTH, 2 * DEPTH):
        async with await open_store(targets.new(kind)) as store:
            await chain(store, depth)
            counter.count = 0
            await operation(store, depth, tmp / f"{depth}")
            found[depth] = counter.count
    return found


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("name", sorted(FAMILY))
async def test_an_operation_over_a_family_costs_statements_in_proportion_to_its_depth(
    kind: str, name: str, store_targets: StoreTargets, statements: Counter, tmp_path: Path
) -> None:
    found = await costs(kind, store_targets, statements, FAMILY[name], tmp_path)
    assert found[2 * DEPTH] <= 2 * found[DEPTH], found


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("name", sorted(DEEPEST))
async def test_an_operation_on_a_deep_fork_costs_the_same_statements_whatever_its_depth(
    kind: str, name: str, store_targets: StoreTargets, statements: Counter, tmp_path: Path
) -> None:
    found = await costs(kind, store_targets, statements, DEEPEST[name], tmp_path)
    assert found[2 * DEPTH] <= found[DEPTH], found


async def test_memory_summaries_decode_a_line_a_session(
    store_targets: StoreTargets, decoded: Counter, tmp_path: Path
) -> None:
    found = await costs("memory", store_targets, decoded, FAMILY["summaries"], tmp_path)
    assert found == {DEPTH: DEPTH, 2 * DEPTH: 2 * DEPTH}


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgresql"])
async def test_a_deep_chain_summarises_and_reads_back_whole(
    kind: str, store_targets: StoreTargets
) -> None:
    async with await open_store(store_targets.new(kind)) as store:
        deepest = await chain(store, 2 * DEPTH)
        await store.fork(deepest, at="e3", meta=SessionMeta(id="inside"))
        summaries = {s.meta.id: s for s in await store.summaries(limit=None)}
        assert [summaries[session(n)].entries for n in range(2 * DEPTH)] == [
            *range(1, 2 * DEPTH),
            2 * DEPTH + 1,
        ]
        assert [id_ for id_, s in summaries.items() if s.compacted] == [deepest]
        assert all(s.fault is None for s in summaries.values())
        assert summaries["inside"].entries == 4
        assert summaries["inside"].last_timestamp == summaries[session(3)].last_timestamp
        entries = await store.load(deepest)
        assert [e.id for e in entries] == [*(f"e{n}" for n in range(2 * DEPTH)), "c"]
        assert [e.id for e in await store.load("inside")] == ["e0", "e1", "e2", "e3"]
        assert [e.id async for e in store.iter_entries(deepest)] == [e.id for e in entries]
        await store.erase(deepest, reason="test")
        assert await store.integrity() == []


async def test_a_fork_whose_chain_breaks_deep_down_is_summarised_as_faulty(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    async with await open_store(f"sqlite:///{db}") as store:
        await chain(store, 6)
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("DROP TRIGGER sessions_no_update")  # only a test may do this
        # s2 now shares no entry its base holds as its own: s3.. break through it.
        connection.execute("UPDATE sessions SET base_seq = 1 WHERE id = 's2'")
    async with await open_store(f"sqlite:///{db}") as store:
        summaries = {s.meta.id: s for s in await store.summaries(limit=None)}
        for n in (2, 3, 4, 5):
            with pytest.raises(CorruptSessionError) as loaded:
                await store.load(session(n))
            assert summaries[session(n)].fault == str(loaded.value)
        assert summaries[session(1)].fault is None
