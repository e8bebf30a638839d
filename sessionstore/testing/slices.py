"""The slice contract as tests: runs of a session's entries read by position
(`SessionStore.load_slice`; part of `SessionStoreContract`)."""

from __future__ import annotations

import pytest

from sessionstore import (
    ConfigurationError,
    SessionEntry,
    SessionMeta,
)
from sessionstore.store import Capability, EntrySlice, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import compaction, lines, message

STARTS = [-9, -7, -3, -1, 0, 1, 3, 6, 7, 9]
STOPS: list[int | None] = [None, -9, -3, -1, 0, 2, 5, 7, 9]


async def _session(store: SessionStore, entries: list[SessionEntry]) -> str:
    session = await store.create(SessionMeta.new())
    if entries:
        await store.append_many(session, entries)
    return session


async def _check_slices(store: SessionStore, session: str, starts: list[int]) -> None:
    """Every slice of ``session`` on the grid is ``load(session)[start:stop]``."""
    every = await store.load(session)
    for start in starts:
        for stop in STOPS:
            got = await store.load_slice(session, start, stop)
            first = slice(start, stop).indices(len(every))[0]
            assert (lines(got.entries), got.start, got.length) == (
                lines(every[start:stop]),
                first,
                len(every),
            ), f"load_slice({start}, {stop})"
            assert got.stop == got.start + len(got.entries)


def _seven() -> list[SessionEntry]:
    entries: list[SessionEntry] = [message(f"e{n}", f"text {n}") for n in range(6)]
    entries.insert(4, compaction("c", "what came before", "e2"))
    return entries


@pytest.mark.asyncio
class SliceContract:
    """A slice is ``load(...)[start:stop]``, with where it stands. Runs over
    the ``store`` fixture of `SessionStoreContract`."""

    async def test_every_slice_is_the_loaded_list_sliced(self, store: SessionStore) -> None:
        session = await _session(store, _seven())
        await _check_slices(store, session, STARTS)

    async def test_an_empty_session_slices_to_nothing(self, store: SessionStore) -> None:
        session = await _session(store, [])
        for start, stop in [(0, None), (-5, None), (3, None), (0, 4), (-2, -1)]:
            assert await store.load_slice(session, start, stop) == EntrySlice([], 0, 0)

    @needs(Capability.BRANCHES)
    async def test_slices_of_a_fork_of_a_fork_cross_what_each_shares(
        self, store: SessionStore
    ) -> None:
        source = await _session(store, [message(f"s{n}", f"source {n}") for n in range(5)])
        fork = (await store.fork(source, at="s2")).id
        await store.append_many(fork, [message(f"f{n}", f"fork {n}") for n in range(3)])
        deeper = (await store.fork(fork, at="f1")).id
        await store.append_many(deeper, [message(f"d{n}", f"deeper {n}") for n in range(2)])
        await store.append(source, message("s5", "the source goes on"))
        await _check_slices(store, deeper, STARTS)
        assert [entry.id for entry in (await store.load_slice(deeper, 2, 6)).entries] == [
            "s2",
            "f0",
            "f1",
            "d0",
        ]

    @needs(Capability.BRANCHES)
    async def test_a_fork_holding_no_entry_of_its_own_slices_what_it_shares(
        self, store: SessionStore
    ) -> None:
        source = await _session(store, [message(f"s{n}", f"source {n}") for n in range(4)])
        fork = (await store.fork(source, at="s2")).id
        await store.append(source, message("s4", "not shared"))
        got = await store.load_slice(fork, -2)
        assert ([entry.id for entry in got.entries], got.start, got.length) == (["s1", "s2"], 1, 3)
        assert await store.load_slice(fork, 3) == EntrySlice([], 3, 3)

    async def test_a_reader_reads_on_from_where_it_stopped(self, store: SessionStore) -> None:
        session = await _session(store, [message("a", "first"), message("b", "second")])
        seen = await store.load_slice(session)
        assert seen.stop == seen.length == 2
        assert await store.load_slice(session, seen.stop) == EntrySlice([], 2, 2)
        await store.append_many(session, [message("c", "third"), message("d", "fourth")])
        new = await store.load_slice(session, seen.stop)
        assert ([entry.id for entry in new.entries], new.start, new.length) == (["c", "d"], 2, 4)
        beyond = await store.load_slice(session, 10)
        assert beyond == EntrySlice([], 4, 4)

    async def test_long_slices_match_too(self, store: SessionStore) -> None:
        entries: list[SessionEntry] = [message(f"e{n}", f"entry {n}") for n in range(150)]
        session = await _session(store, entries)
        every = lines(entries)
        for start, stop in [(0, None), (10, None), (-100, None), (-149, -1), (5, 140), (148, 0)]:
            got = await store.load_slice(session, start, stop)
            assert lines(got.entries) == every[start:stop], f"load_slice({start}, {stop})"

    async def test_bad_positions_are_refused_before_reading(self, store: SessionStore) -> None:
        session = await _session(store, [message("a", "first")])
        for start, stop in [(1.5, None), ("1", None), (True, None), (0, 2.0), (0, "x")]:
            with pytest.raises(ConfigurationError):
                await store.load_slice(session, start, stop)  # type: ignore[arg-type]
