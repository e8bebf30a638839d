"""The branch contract as tests: forks and named heads (part of `SessionStoreContract`)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import (
    CompactionEntry,
    DuplicateSessionError,
    EntryNotFoundError,
    HeadMove,
    InvalidRecordError,
    InvalidSessionIdError,
    MessageEntry,
    SessionConflictError,
    SessionEntry,
    SessionMeta,
    SessionNotFoundError,
    encode,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import (
    IMPORTED_LINES,
    INVALID_IDS,
    compaction,
    examples,
    imported_header,
    message,
    raw,
    reads_as,
    stream,
)


async def _summary(
    store: SessionStore, session_id: str
) -> tuple[int, str | None, bool, str | None]:
    (found,) = [s for s in await store.summaries() if s.meta.id == session_id]
    return found.entries, found.last_timestamp, found.compacted, found.meta.parent_session


@pytest.mark.asyncio
class BranchContract:
    """Forks share or copy a prefix and never write their source; heads keep
    every position."""

    # ---------------------------------------------------------- fork

    @needs(Capability.BRANCHES, Capability.SUMMARIES)
    async def test_fork_keeps_everything_by_default_and_names_its_parent(
        self, store: SessionStore
    ) -> None:
        source = await store.create(SessionMeta.new())
        entries: list[SessionEntry] = [message("e1", "a"), message("e2", "b")]
        await store.append_many(source, entries)
        meta = await store.fork(source)
        assert meta.parent_session == source
        assert meta.id != source
        assert meta in await store.list()
        await reads_as(store, meta.id, entries)
        assert (await raw(store, meta.id))[0] == encode(meta)
        assert await _summary(store, meta.id) == (2, entries[-1].timestamp, False, source)

    @pytest.mark.parametrize("at", [0, 2, 4])  # the first, a middle, the last entry
    @needs(Capability.BRANCHES)
    async def test_fork_at_an_entry_then_both_sides_go_their_own_way(
        self, store: SessionStore, at: int
    ) -> None:
        source = await store.create(SessionMeta.new())
        entries: list[SessionEntry] = [message(f"e{n}", f"text {n}") for n in range(5)]
        await store.append_many(source, entries)
        fork = (await store.fork(source, at=f"e{at}")).id
        await reads_as(store, fork, entries[: at + 1])
        ours, theirs = message("fork-1", "edited"), message("src-1", "continued")
        await store.append(fork, ours)
        await store.append(source, theirs)
        await reads_as(store, fork, [*entries[: at + 1], ours])
        await reads_as(store, source, [*entries, theirs])

    @needs(Capability.BRANCHES, Capability.SUMMARIES)
    async def test_fork_of_a_fork_to_any_depth(self, store: SessionStore) -> None:
        expected: list[SessionEntry] = []
        session = await store.create(SessionMeta.new())
        chain = [session]
        for depth in range(5):
            added = [message(f"d{depth}-{n}", f"{depth}/{n}") for n in range(3)]
            await store.append_many(session, added)
            expected += added
            # Branch inside the inherited part, then inside the session's own.
            inherited = await store.fork(session, at=expected[1].id)
            await reads_as(store, inherited.id, expected[:2])
            session = (await store.fork(session, at=added[1].id)).id
            chain.append(session)
            expected = expected[:-1]
            await reads_as(store, session, expected)
        for parent, child in itertools.pairwise(chain):
            assert (await _summary(store, child))[3] == parent
        await store.append(chain[-1], message("last", "x"))
        await reads_as(store, chain[-1], [*expected, message("last", "x")])

    @needs(Capability.BRANCHES, Capability.SUMMARIES)
    async def test_compactions_before_and_after_the_fork_point(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        before: list[SessionEntry] = [
            message("e1", "a"),
            message("e2", "b"),
            compaction("c1", "first summary", "e2"),
            message("e3", "c"),
        ]
        await store.append_many(source, before)
        fork = (await store.fork(source)).id
        await reads_as(store, fork, before)
        assert await _summary(store, fork) == (4, before[-1].timestamp, True, source)
        after: list[SessionEntry] = [message("e4", "d"), compaction("c2", "second", "e4")]
        await store.append_many(fork, after)
        await reads_as(store, fork, before + after)
        await reads_as(store, source, before)
        early = (await store.fork(source, at="e2")).id
        assert (await _summary(store, early))[2] is False
        await store.append(early, compaction("c3", "early", "e1"))
        await reads_as(store, early, [*before[:2], compaction("c3", "early", "e1")])

    @needs(Capability.BRANCHES)
    async def test_a_fork_keeps_imported_lines_byte_for_byte(self, store: SessionStore) -> None:
        await store.import_session(imported_header("imported"), stream(IMPORTED_LINES))
        meta = await store.fork("imported", at="c1")
        assert await raw(store, meta.id) == [encode(meta), *IMPORTED_LINES[:4]]
        whole = await store.fork("imported")
        assert await raw(store, whole.id) == [encode(whole), *IMPORTED_LINES]
        assert await store.load_context(whole.id) == await store.load_context("imported")

    @needs(Capability.BRANCHES)
    async def test_fork_at_the_first_of_entries_sharing_an_id(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        entries: list[SessionEntry] = [message("x", "one"), message("y", "two"), message("x", "3")]
        await store.append_many(source, entries)
        await reads_as(store, (await store.fork(source, at="x")).id, entries[:1])

    @needs(Capability.BRANCHES, Capability.SUMMARIES)
    async def test_fork_of_an_empty_session(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        fork = (await store.fork(source)).id
        await reads_as(store, fork, [])
        assert await _summary(store, fork) == (0, None, False, source)
        await store.append(fork, message("e1", "x"))
        await reads_as(store, fork, [message("e1", "x")])
        assert await store.load(source) == []
        again = (await store.fork(fork)).id
        await reads_as(store, again, [message("e1", "x")])

    @needs(Capability.BRANCHES)
    async def test_fork_takes_a_header_and_sets_its_parent(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        await store.append(source, message("e1", "x"))
        given = SessionMeta(id="retry-2", created_at="2026-01-01T00:00:00Z")
        meta = await store.fork(source, meta=given)
        assert meta == SessionMeta(
            id="retry-2", parent_session=source, created_at="2026-01-01T00:00:00Z"
        )
        assert (await raw(store, "retry-2"))[0] == encode(meta)
        named = SessionMeta(id="named", parent_session=source)
        assert await store.fork(source, meta=named) == named

    @needs(Capability.BRANCHES)
    async def test_fork_refusals_create_nothing(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        await store.append(source, message("e1", "x"))
        before = await store.list()
        with pytest.raises(EntryNotFoundError) as missing:
            await store.fork(source, at="nope", meta=SessionMeta(id="f1"))
        assert source in str(missing.value)
        assert "nope" in str(missing.value)
        assert (missing.value.session_id, missing.value.entry_id) == (source, "nope")
        with pytest.raises(SessionNotFoundError, match="ghost"):
            await store.fork("ghost")
        with pytest.raises(DuplicateSessionError):
            await store.fork(source, meta=SessionMeta(id=source))
        with pytest.raises(InvalidRecordError, match="other"):
            await store.fork(source, meta=SessionMeta(id="f2", parent_session="other"))
        for bad in INVALID_IDS:
            with pytest.raises(InvalidSessionIdError):
                await store.fork(bad)
        with pytest.raises(InvalidSessionIdError):
            await store.fork(source, meta=SessionMeta(id="../escape"))
        assert sorted(m.id for m in await store.list()) == sorted(m.id for m in before)
        assert await store.load(source) == [message("e1", "x")]

    async def test_a_session_cannot_be_its_own_parent(self, store: SessionStore) -> None:
        with pytest.raises(InvalidRecordError, match="own parent"):
            await store.create(SessionMeta(id="s", parent_session="s"))
        header = '{"id":"s","version":1,"parent_session":"s","created_at":"2020-01-01T00:00:00Z"}'
        with pytest.raises(InvalidRecordError, match="cannot be its own parent_session"):
            await store.import_session(header, stream([]))
        assert await store.list() == []

    @needs(Capability.BRANCHES)
    async def test_appends_racing_a_fork_leave_it_a_prefix(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        await store.append(source, message("e0", "x"))

        async def writer() -> None:
            for n in range(1, 30):
                await store.append(source, message(f"e{n}", "x"))

        async def forker() -> list[str]:
            made = []
            for _ in range(10):
                made.append((await store.fork(source)).id)
                await asyncio.sleep(0)
            return made

        _, forks = await asyncio.gather(writer(), forker())
        whole = await store.load(source)
        for fork in forks:
            got = await store.load(fork)
            assert got == whole[: len(got)]
            assert got
        assert await store.integrity() == []

    @needs(Capability.BRANCHES)
    async def test_an_import_continues_a_fork(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        await store.append_many(source, [message("e1", "a"), message("e2", "b")])
        meta = await store.fork(source, at="e1")
        header = (await raw(store, meta.id))[0]
        await store.import_session(header, stream([encode(message("i1", "c"))]), after=1)
        await reads_as(store, meta.id, [message("e1", "a"), message("i1", "c")])
        assert await store.integrity() == []

    # ---------------------------------------------------------- heads

    @needs(Capability.BRANCHES)
    async def test_a_head_keeps_every_position_oldest_first(self, store: SessionStore) -> None:
        one = await store.create(SessionMeta.new())
        two = (await store.fork(one)).id
        assert await store.head("chat") is None
        assert await store.head_history("chat") == []
        moves = [
            await store.set_head("chat", one),
            await store.set_head("chat", two),
            await store.set_head("chat", one),
        ]
        assert await store.head("chat") == one
        history = await store.head_history("chat")
        assert history == moves
        assert [move.session_id for move in history] == [one, two, one]
        assert all(move.at for move in history)
        assert await store.head("other") is None
        await store.set_head("other", two)
        assert sorted(await store.heads()) == ["chat", "other"]

    @needs(Capability.BRANCHES)
    async def test_head_refusals_record_nothing(self, store: SessionStore, session: str) -> None:
        await store.set_head("chat", session)
        with pytest.raises(SessionNotFoundError, match="ghost"):
            await store.set_head("chat", "ghost")
        for bad in INVALID_IDS:
            with pytest.raises(InvalidSessionIdError):
                await store.set_head(bad, session)
            with pytest.raises(InvalidSessionIdError):
                await store.head(bad)
            with pytest.raises(InvalidSessionIdError):
                await store.head_history(bad)
        assert [move.session_id for move in await store.head_history("chat")] == [session]
        assert await store.heads() == ["chat"]

    @needs(Capability.BRANCHES)
    async def test_heads_moved_from_many_tasks_keep_every_position(
        self, store: SessionStore
    ) -> None:
        sessions = [await store.create(SessionMeta(id=f"s{n}")) for n in range(20)]
        await asyncio.gather(*(store.set_head("busy", s) for s in sessions for _ in range(3)))
        history = await store.head_history("busy")
        assert sorted(move.session_id for move in history) == sorted(sessions * 3)
        assert await store.head("busy") == history[-1].session_id

    # ---------------------------------------------------------- importing heads

    @needs(Capability.BRANCHES)
    async def test_an_imported_head_keeps_each_move_as_given(self, store: SessionStore) -> None:
        one = await store.create(SessionMeta.new())
        two = await store.create(SessionMeta.new())
        moves = [
            HeadMove(session_id=one, at="2026-01-01T00:00:00Z"),
            HeadMove(session_id=two, at="2026-01-02T00:00:00.123456789+02:00"),
        ]
        assert await store.import_head("chat", moves) == 2
        assert await store.head_history("chat") == moves  # their times, not now
        assert await store.head("chat") == two
        assert await store.heads() == ["chat"]
        later = [HeadMove(session_id=one, at="not even a time")]
        assert await store.import_head("chat", later, after=2) == 1
        moved = await store.set_head("chat", two)  # moves on after what was imported
        assert await store.head_history("chat") == [*moves, *later, moved]

    @needs(Capability.BRANCHES)
    async def test_head_import_refusals_record_nothing(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        first = await store.set_head("chat", session)
        move = HeadMove(session_id=session, at="2026-01-01T00:00:00Z")
        for held in (0, 2):
            with pytest.raises(SessionConflictError, match="'chat'") as conflict:
                await store.import_head("chat", [move], after=held)
            assert conflict.value.what == "head"
        for bad in INVALID_IDS:
            with pytest.raises(InvalidSessionIdError):
                await store.import_head(bad, [move])
            with pytest.raises(InvalidSessionIdError):
                await store.import_head("chat", [move.model_copy(update={"session_id": bad})])
        with pytest.raises(InvalidRecordError):
            await store.import_head("chat", [move, "not a move"], after=1)  # type: ignore[list-item]
        assert await store.head_history("chat") == [first]
        assert await store.heads() == ["chat"]

    @needs(Capability.BRANCHES)
    async def test_an_imported_head_may_name_sessions_no_longer_there(
        self, store: SessionStore
    ) -> None:
        # A head's history may name an erased (or retired) session: it comes
        # back from an archive as it was, like the head's move before the erase.
        ghost = HeadMove(session_id="erased-long-ago", at="2026-01-01T00:00:00Z")
        assert await store.import_head("chat", [ghost]) == 1
        assert await store.head("chat") == "erased-long-ago"
        with pytest.raises(SessionNotFoundError):
            await store.set_head("chat", "erased-long-ago")  # a new move needs a session

    @needs(Capability.BRANCHES)
    async def test_an_empty_head_import_sets_no_head(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        assert await store.import_head("never", []) == 0
        assert await store.heads() == []
        await store.set_head("chat", session)
        assert await store.import_head("chat", [], after=1) == 0
        with pytest.raises(SessionConflictError):
            await store.import_head("chat", [], after=0)
        assert await store.heads() == ["chat"]

    # ---------------------------------------------------------- a model

    @needs(Capability.BRANCHES)
    async def test_forks_appends_compactions_and_heads_agree_with_a_model(
        self, store: SessionStore
    ) -> None:
        """Random fork/append/compact/head moves, against plain Python lists;
        each example has its own sessions and heads, and a loop of its own in a
        thread (stores are shared across loops)."""
        runs = itertools.count()

        @examples(25)
        @given(st.lists(_OPERATION, min_size=1, max_size=25))
        def check(operations: list[tuple[str, int, int]]) -> None:
            model = _Model(f"x{next(runs)}-")
            asyncio.run(model.run(store, operations))

        await asyncio.to_thread(check)


_OPERATION = st.tuples(
    st.sampled_from(["append", "append_many", "fork", "fork_at", "compact", "head"]),
    st.integers(0, 1000),
    st.integers(0, 1000),
)


@dataclass
class _Model:
    """Sessions as plain lists of entries, heads as plain lists of ids."""

    prefix: str
    sessions: dict[str, list[SessionEntry]] = field(default_factory=dict)
    heads: dict[str, list[str]] = field(default_factory=dict)
    made: itertools.count[int] = field(default_factory=itertools.count)

    def _name(self) -> str:
        return f"{self.prefix}{next(self.made)}"

    async def run(self, store: SessionStore, operations: list[tuple[str, int, int]]) -> None:
        root = await store.create(SessionMeta(id=self._name()))
        self.sessions[root] = []
        for kind, a, b in operations:
            ids = sorted(self.sessions)
            target = ids[a % len(ids)]
            entries = self.sessions[target]
            if kind in ("append", "append_many"):
                added: list[SessionEntry] = [
                    message(self._name(), f"text {n}") for n in range(1 + b % 3)
                ]
                if kind == "append":
                    for entry in added:
                        await store.append(target, entry)
                else:
                    await store.append_many(target, added)
                entries += added
            elif kind == "fork" or (kind == "fork_at" and not entries):
                fork = (await store.fork(target, meta=SessionMeta(id=self._name()))).id
                self.sessions[fork] = list(entries)
            elif kind == "fork_at":
                at = entries[b % len(entries)].id  # ids are unique here
                meta = SessionMeta(id=self._name())
                fork = (await store.fork(target, at=at, meta=meta)).id
                self.sessions[fork] = entries[: b % len(entries) + 1]
            elif kind == "compact":
                kept = [e.id for e in entries if isinstance(e, MessageEntry)] or ["none"]
                marker = CompactionEntry(
                    id=self._name(), timestamp="t", summary="s", first_kept_id=kept[b % len(kept)]
                )
                await store.append(target, marker)
                entries.append(marker)
            else:
                name = f"{self.prefix}head{b % 3}"
                await store.set_head(name, target)
                self.heads.setdefault(name, []).append(target)
        for session_id, expected in self.sessions.items():
            await reads_as(store, session_id, expected)
        for name, positions in self.heads.items():
            assert [move.session_id for move in await store.head_history(name)] == positions
