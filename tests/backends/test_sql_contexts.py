"""The SQL store keeps the contexts it built: they must stay exact."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import CompactionEntry, Message, MessageEntry, SessionMeta, SqlStore
from sessionstore.backends.sql import contexts
from sessionstore.context import build_context
from sessionstore.store import Entry

IDS = ["a", "b", "c"]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.sampled_from(IDS)),
        st.tuples(st.just("compaction"), st.sampled_from([*IDS, "none"])),
        st.tuples(st.just("elsewhere"), st.sampled_from(IDS)),  # another store object
        st.tuples(st.just("context"), st.just("")),
    ),
    max_size=30,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
async def test_a_kept_context_equals_build_context_of_the_log(
    tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    # Messages arriving after a compaction, with the id it keeps from or
    # not, new compactions, appends by another store object on the same
    # database: each context asked for must be build_context of the log.
    path = tmp_path / f"{len(list(tmp_path.iterdir()))}.db"
    async with await SqlStore.open(str(path)) as store, await SqlStore.open(str(path)) as other:
        session_id = await store.create(SessionMeta.new())
        log: list[Entry] = []
        for number, (kind, value) in enumerate(steps):
            entry: Entry
            if kind == "context":
                assert await store.load_context(session_id) == build_context(log)
                continue
            if kind == "compaction":
                entry = CompactionEntry(
                    id=f"c{number}", timestamp="t", summary=f"s{number}", first_kept_id=value
                )
            else:
                entry = MessageEntry(id=value, timestamp="t", message=Message.user(f"m{number}"))
            await (other if kind == "elsewhere" else store).append(session_id, entry)
            log.append(entry)
        assert await store.load_context(session_id) == build_context(log)
        assert await other.load_context(session_id) == build_context(log)


async def test_kept_contexts_stay_within_their_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(contexts, "KEPT_SESSIONS", 2)
    monkeypatch.setattr(contexts, "KEPT_MESSAGES", 5)
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        sizes = [2, 2, 2, 6, 1]  # the 6-message context is never kept
        ids = []
        for size in sizes:
            session_id = await store.create(SessionMeta.new())
            log = [MessageEntry.new(Message.user(f"m{n}")) for n in range(size)]
            await store.append_many(session_id, log)
            assert await store.load_context(session_id) == build_context(log)
            ids.append(session_id)
            kept = store._contexts._built
            assert len(kept) <= 2
            assert sum(len(built.messages) for built in kept.values()) <= 5
            assert store._contexts._messages == sum(len(b.messages) for b in kept.values())
        assert list(store._contexts._built) == [ids[2], ids[4]]
