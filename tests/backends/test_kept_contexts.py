"""Contexts kept between calls, on SQL and JSONL: they must stay exact."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import (
    CompactionEntry,
    Message,
    MessageEntry,
    SessionEntry,
    SessionMeta,
    build_context,
    open_store,
)
from tests.kinds import PERSISTENT_KINDS, StoreTargets

IDS = ["a", "b", "c"]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.sampled_from(IDS)),
        st.tuples(st.just("messages"), st.sampled_from(IDS)),  # a batch of three
        st.tuples(st.just("compaction"), st.sampled_from([*IDS, "none"])),
        st.tuples(st.just("elsewhere"), st.sampled_from(IDS)),  # another store object
        st.tuples(st.just("context"), st.just("")),
    ),
    max_size=30,
)


@pytest.fixture(params=PERSISTENT_KINDS)
def target(request: pytest.FixtureRequest, store_targets: StoreTargets) -> str:
    """Storage that two store objects share (each test's session is new)."""
    return store_targets.new(request.param)


@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
async def test_a_kept_context_equals_build_context_of_the_log(
    target: str, steps: list[tuple[str, str]]
) -> None:
    # Messages arriving after a compaction, with the id it keeps from or
    # not, new compactions, appends by another store object on the same
    # storage: each context asked for must be build_context of the log.
    async with open_store(target) as store, open_store(target) as other:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = []
        for number, (step, value) in enumerate(steps):
            new: list[SessionEntry]
            if step == "context":
                assert await store.load_context(session_id) == build_context(log)
                continue
            if step == "compaction":
                new = [
                    CompactionEntry(
                        id=f"c{number}", timestamp="t", summary=f"s{number}", first_kept_id=value
                    )
                ]
            else:
                count = 3 if step == "messages" else 1
                new = [
                    MessageEntry(id=value, timestamp="t", message=Message.user(f"m{number}.{n}"))
                    for n in range(count)
                ]
            await (other if step == "elsewhere" else store).append_many(session_id, new)
            log += new
        assert await store.load_context(session_id) == build_context(log)
        assert await other.load_context(session_id) == build_context(log)


async def test_the_first_message_with_the_awaited_id_moves_the_start(target: str) -> None:
    def message(entry_id: str) -> MessageEntry:
        return MessageEntry(id=entry_id, timestamp="t", message=Message.user(entry_id))

    async with open_store(target) as store:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [
            message("a"),
            CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="k"),
        ]
        await store.append_many(session_id, log)
        assert await store.load_context(session_id) == build_context(log)  # kept, waiting
        for entry_id in ("b", "k", "d"):  # "k" arrives: the context starts there
            await store.append(session_id, message(entry_id))
            log.append(message(entry_id))
            assert await store.load_context(session_id) == build_context(log)
        assert [m.text() for m in build_context(log)] == ["[Conversation summary]\ns", "k", "d"]


async def test_compact_and_context_ids_read_no_more_than_the_context(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compact` and `load_context_with_ids` read what `load_context` reads:
    a store whose whole-session reads fail still answers them."""
    async with await open_store(target) as store:
        session_id = await store.create(SessionMeta.new())
        history = [MessageEntry.new(Message.user(f"m{n}")) for n in range(6)]
        await store.append_many(session_id, history)

        async def no_full_load(*_: object) -> None:
            raise AssertionError("a full load")

        monkeypatch.setattr(store, "load", no_full_load)
        monkeypatch.setattr(store, "iter_entries", no_full_load)
        store.drop_caches()  # built from the storage, not the cache
        entry = await store.compact(session_id, "s", keep_last=2)
        assert entry.first_kept_id == history[4].id
        store.drop_caches()
        pairs = await store.load_context_with_ids(session_id)
        assert [i for i, _ in pairs] == [entry.id, history[4].id, history[5].id]
        monkeypatch.undo()
        assert [m for _, m in pairs] == build_context(await store.load(session_id))
