"""The conditional-write contract as tests: appends and head moves that state
what they expect to find (part of `SessionStoreContract`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable

import pytest

from sessionstore import (
    ConfigurationError,
    InvalidSessionIdError,
    SessionConflictError,
    SessionMeta,
    SessionNotFoundError,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import Backend, message

WRITERS = 6
"""How many writers race in each round."""

ROUNDS = 8
"""How many rounds they race."""


@contextlib.asynccontextmanager
async def _writers(store: SessionStore, backend: Backend) -> AsyncIterator[list[SessionStore]]:
    """``WRITERS`` store objects on one storage (one object, shared, where the
    storage is the object itself), closed at the end."""
    opened = [await backend.open() for _ in range(WRITERS - 1)] if backend.persistent else []
    try:
        yield [store, *opened] if opened else [store] * WRITERS
    finally:
        for other in opened:
            await other.close()


async def _outcome(call: Awaitable[object]) -> SessionConflictError | None:
    """None when ``call`` succeeded, its conflict when it lost."""
    try:
        await call
    except SessionConflictError as exc:
        return exc
    return None


@pytest.mark.asyncio
class ConditionalContract:
    """A conditional write lands only where the store still is as the writer
    read it."""

    # ---------------------------------------------------------- appends

    async def test_an_append_expecting_the_last_entry_lands(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        await store.append(session, message("e1", "a"), expect_last="")
        await store.append_many(session, [message("e2", "b")], expect_last="e1")
        await store.append_many(session, [message("e3", "c"), message("e4", "d")], expect_last="e2")
        await store.append_many(session, [], expect_last="e4")  # checks, stores nothing
        assert [entry.id for entry in await store.load(session)] == ["e1", "e2", "e3", "e4"]

    async def test_an_append_expecting_another_end_writes_nothing(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message("e1", "a"), message("e2", "b")])
        for expected in ("e1", "", "nowhere"):
            with pytest.raises(SessionConflictError) as caught:
                await store.append_many(
                    session, [message("x1", "x"), message("x2", "y")], expect_last=expected
                )
            error = caught.value
            assert (error.session_id, error.expected, error.actual) == (session, expected, "e2")
            assert session in str(error)
            assert "'e2'" in str(error)
        with pytest.raises(SessionConflictError):
            await store.append_many(session, [], expect_last="")
        empty = await store.create(SessionMeta.new())
        with pytest.raises(SessionConflictError, match="holds no entry"):
            await store.append(empty, message("x", "x"), expect_last="e2")
        with pytest.raises(SessionNotFoundError):  # the arguments are checked first
            await store.append(SessionMeta.new().id, message("e1", "a"), expect_last="")
        for bad in (1, b"e1", ["e1"]):
            with pytest.raises(ConfigurationError, match="expect_last"):
                await store.append(empty, message("e1", "a"), expect_last=bad)  # type: ignore[arg-type]
        assert [entry.id for entry in await store.load(session)] == ["e1", "e2"]
        assert await store.load(empty) == []

    @needs(Capability.BRANCHES)
    async def test_a_fork_ends_at_the_last_entry_it_shares_until_it_has_its_own(
        self, store: SessionStore
    ) -> None:
        source = await store.create(SessionMeta.new())
        await store.append_many(source, [message(f"e{n}", "x") for n in range(1, 5)])
        fork = (await store.fork(source, at="e2")).id
        with pytest.raises(SessionConflictError) as caught:
            await store.append(fork, message("f1", "y"), expect_last="e4")
        assert caught.value.actual == "e2"
        await store.append(fork, message("f1", "y"), expect_last="e2")
        deeper = (await store.fork(fork)).id  # shares everything: its own rows are none
        await store.append(deeper, message("d1", "z"), expect_last="f1")
        whole = (await store.fork(source)).id
        await store.append(whole, message("w1", "z"), expect_last="e4")
        assert [entry.id for entry in await store.load(deeper)] == ["e1", "e2", "f1", "d1"]
        assert [entry.id for entry in await store.load(source)] == ["e1", "e2", "e3", "e4"]

    async def test_racing_writers_with_one_expectation_let_exactly_one_in(
        self, store: SessionStore, backend: Backend
    ) -> None:
        session = await store.create(SessionMeta.new())
        async with _writers(store, backend) as writers:
            last = ""
            for round_ in range(ROUNDS):
                attempts = [
                    writer.append_many(
                        session,
                        [message(f"r{round_}w{n}a", "a"), message(f"r{round_}w{n}b", "b")],
                        expect_last=last,
                    )
                    for n, writer in enumerate(writers)
                ]
                outcomes = await asyncio.gather(*map(_outcome, attempts))
                winners = [n for n, outcome in enumerate(outcomes) if outcome is None]
                assert len(winners) == 1, outcomes
                winner = f"r{round_}w{winners[0]}"
                for outcome in outcomes:
                    if outcome is not None:
                        assert (outcome.expected, outcome.actual) == (last, f"{winner}b")
                last = f"{winner}b"
        entries = await store.load(session)
        assert len(entries) == 2 * ROUNDS  # each round one whole batch: no gap, nothing more
        for first, second in zip(entries[::2], entries[1::2], strict=True):
            assert first.id.endswith("a")
            assert second.id == first.id[:-1] + "b"
        assert await store.integrity() == []

    # ---------------------------------------------------------- heads

    @needs(Capability.BRANCHES)
    async def test_a_head_moves_only_from_where_the_mover_read_it(
        self, store: SessionStore
    ) -> None:
        first, second, third = [await store.create(SessionMeta.new()) for _ in range(3)]
        await store.set_head("chat", first, expect=None)
        await store.set_head("chat", second, expect=first)
        with pytest.raises(SessionConflictError) as caught:
            await store.set_head("chat", third, expect=first)
        error = caught.value
        assert (error.session_id, error.what, error.expected, error.actual) == (
            "chat",
            "head",
            first,
            second,
        )
        with pytest.raises(SessionConflictError, match="never set"):
            await store.set_head("other", third, expect=first)
        with pytest.raises(SessionConflictError):
            await store.set_head("chat", third, expect=None)
        with pytest.raises(SessionNotFoundError):  # the arguments are checked first
            await store.set_head("chat", SessionMeta.new().id, expect=second)
        with pytest.raises(ConfigurationError, match="expect"):
            await store.set_head("chat", third, expect=3)  # type: ignore[arg-type]
        assert [move.session_id for move in await store.head_history("chat")] == [first, second]
        assert await store.head("other") is None
        assert "other" not in await store.heads()

    @needs(Capability.BRANCHES)
    async def test_racing_head_movers_with_one_expectation_let_exactly_one_move(
        self, store: SessionStore, backend: Backend
    ) -> None:
        async with _writers(store, backend) as movers:
            where: str | None = None
            for _ in range(ROUNDS):
                # New sessions each round: a move to where the head stands
                # would leave it where the next round expects it.
                targets = [await store.create(SessionMeta.new()) for _ in range(WRITERS)]
                attempts = [
                    mover.set_head("chat", target, expect=where)
                    for mover, target in zip(movers, targets, strict=True)
                ]
                outcomes = await asyncio.gather(*map(_outcome, attempts))
                winners = [n for n, outcome in enumerate(outcomes) if outcome is None]
                assert len(winners) == 1, outcomes
                where = targets[winners[0]]
                assert all(o is None or o.actual == where for o in outcomes)
        history = await store.head_history("chat")
        assert len(history) == ROUNDS
        assert history[-1].session_id == where

    # ---------------------------------------------------------- head and session at once

    @needs(Capability.BRANCHES)
    async def test_an_append_expecting_a_head_lands_only_on_its_session(
        self, store: SessionStore
    ) -> None:
        current, other = [await store.create(SessionMeta.new()) for _ in range(2)]
        with pytest.raises(SessionConflictError, match="never set") as caught:
            await store.append(current, message("e0", "x"), expect_head="chat")
        assert (caught.value.what, caught.value.expected, caught.value.actual) == (
            "head",
            current,
            None,
        )
        await store.set_head("chat", current)
        await store.append(current, message("e1", "a"), expect_head="chat")
        await store.append_many(current, [message("e2", "b")], expect_head="chat", expect_last="e1")
        with pytest.raises(SessionConflictError) as caught:
            await store.append_many(other, [message("x1", "x")], expect_head="chat")
        error = caught.value
        assert (error.session_id, error.what, error.expected, error.actual) == (
            "chat",
            "head",
            other,
            current,
        )
        assert "append" in str(error)
        assert [entry.id for entry in await store.load(current)] == ["e1", "e2"]
        assert await store.load(other) == []
        with pytest.raises(ConfigurationError, match="expect_head"):
            await store.append(current, message("x", "x"), expect_head=7)  # type: ignore[arg-type]
        with pytest.raises(InvalidSessionIdError):
            await store.append(current, message("x", "x"), expect_head="a/b")

    @needs(Capability.BRANCHES)
    async def test_a_read_expecting_a_head_reads_only_the_session_it_names(
        self, store: SessionStore
    ) -> None:
        current, other = [await store.create(SessionMeta.new()) for _ in range(2)]
        await store.append_many(current, [message("e1", "a"), message("e2", "b")])
        with pytest.raises(SessionConflictError, match="never set") as caught:
            await store.load_slice(current, -1, expect_head="chat")
        assert (caught.value.what, caught.value.expected, caught.value.actual) == (
            "head",
            current,
            None,
        )
        await store.set_head("chat", current)
        read = await store.load_slice(current, -1, expect_head="chat")
        assert ([entry.id for entry in read.entries], read.start, read.length) == (["e2"], 1, 2)
        assert (await store.load_slice(current, 0, 1, expect_head="chat")).entries[0].id == "e1"
        with pytest.raises(SessionConflictError) as caught:
            await store.load_slice(other, 0, expect_head="chat")
        error = caught.value
        assert (error.session_id, error.what, error.expected, error.actual) == (
            "chat",
            "head",
            other,
            current,
        )
        assert "nothing was read" in str(error)
        with pytest.raises(ConfigurationError, match="expect_head"):
            await store.load_slice(current, 0, expect_head=7)  # type: ignore[arg-type]
        with pytest.raises(InvalidSessionIdError):
            await store.load_slice(current, 0, expect_head="a/b")
        await store.set_head("chat", other, expect=current)
        assert (await store.load_slice(other, 0, expect_head="chat")).length == 0
        with pytest.raises(SessionConflictError):
            await store.load_slice(current, 0, expect_head="chat")

    @needs(Capability.BRANCHES)
    async def test_a_head_move_expecting_its_session_end_stops_at_an_append(
        self, store: SessionStore
    ) -> None:
        current, fork = [await store.create(SessionMeta.new()) for _ in range(2)]
        await store.set_head("chat", current)
        await store.append(current, message("e1", "a"))
        with pytest.raises(SessionConflictError) as caught:
            await store.set_head("chat", fork, expect=current, expect_last="")
        error = caught.value
        assert (error.session_id, error.what, error.expected, error.actual) == (
            current,
            "session",
            "",
            "e1",
        )
        assert "the move expected" in str(error)
        assert [move.session_id for move in await store.head_history("chat")] == [current]
        await store.set_head("chat", fork, expect=current, expect_last="e1")
        assert await store.head("chat") == fork
        for bad_expect in (..., None):
            with pytest.raises(ConfigurationError, match="expect_last"):
                await store.set_head("chat", current, expect=bad_expect, expect_last="e1")
        with pytest.raises(SessionConflictError):  # the head left ``current``
            await store.set_head("chat", current, expect=current, expect_last="e1")

    @needs(Capability.BRANCHES)
    async def test_movers_and_appenders_racing_on_a_conversation_never_lose_an_append(
        self, store: SessionStore, backend: Backend
    ) -> None:
        # A pop's shape: read where the head stands and how that session ends,
        # then move expecting both; appenders add only to the head's session.
        current = await store.create(SessionMeta.new())
        await store.set_head("chat", current)
        last = ""
        async with _writers(store, backend) as writers:
            for round_ in range(ROUNDS):
                fresh = [await store.create(SessionMeta.new()) for _ in range(WRITERS // 2)]
                movers = [
                    writer.set_head("chat", target, expect=current, expect_last=last)
                    for writer, target in zip(writers, fresh, strict=False)
                ]
                appenders = [
                    writer.append(current, message(f"r{round_}a{n}", "x"), expect_head="chat")
                    for n, writer in enumerate(writers[len(fresh) :])
                ]
                outcomes = await asyncio.gather(*map(_outcome, [*movers, *appenders]))
                moved = [t for t, o in zip(fresh, outcomes, strict=False) if o is None]
                landed = [
                    f"r{round_}a{n}" for n, o in enumerate(outcomes[len(fresh) :]) if o is None
                ]
                held = [entry.id for entry in await store.load(current)]
                assert len(moved) <= 1, outcomes
                if moved:  # no append landed before the move, none after it
                    assert held[-1:] == ([last] if last else []), outcomes
                    assert await store.head("chat") == moved[0]
                    current, last = moved[0], ""
                else:  # the end moved under every mover: appends landed
                    assert landed, outcomes
                    assert held[-len(landed) :] == sorted(landed, key=held.index)
                    assert set(landed) <= set(held)
                    last = held[-1]
