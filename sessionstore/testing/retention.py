"""Retention policies over every store, as tests (`sessionstore.retention`; part
of `SessionStoreContract`): each filter, the plan's sizes, fork families
whole, reruns, a session written to or erased between plan and act, and two
runs at once."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path

import pytest

from sessionstore import SessionMeta
from sessionstore.retention import Plan, Policy, apply, plan
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import Backend, blocks, digest, message, raw
from sessionstore.timestamps import Timestamp

__all__ = ["RetentionContract"]

OLD = "2020-01-01T00:00:00Z"
IDLE = Policy(idle_for=timedelta(days=30))


def _recent() -> str:
    """A time of a day ago: not idle for 30 days."""
    return str(Timestamp.from_datetime(Timestamp.now().to_datetime() - timedelta(days=1)))


async def _session(
    store: SessionStore,
    session_id: str,
    *,
    created: str = OLD,
    last: str | None = OLD,
    owner: str | None = None,
    tags: tuple[str, ...] = (),
) -> None:
    """A session created at ``created``; its one entry at ``last`` (None: none)."""
    await store.create(SessionMeta(id=session_id, created_at=created, owner=owner, tags=tags))
    if last is not None:
        await store.append(session_id, message(f"{session_id}-1", "hello", last))


async def _ids(store: SessionStore) -> list[str]:
    return sorted(meta.id for meta in await store.list())


async def _family(store: SessionStore, *, fork_last: str = OLD) -> None:
    """``root`` <- ``root-fork`` <- ``root-fork-fork``, old, the last entry of the
    youngest at ``fork_last``; and ``alone``, old."""
    await _session(store, "root")
    parent = "root"
    for child in ("root-fork", "root-fork-fork"):
        await store.fork(parent, meta=SessionMeta(id=child, created_at=OLD))
        parent = child
    await store.append("root-fork-fork", message("own", "mine", fork_last))
    await _session(store, "alone")


@needs(Capability.SUMMARIES, Capability.ERASURE)
class RetentionContract:
    """Retention policies over every backend."""

    # ------------------------------------------------------------- filters

    async def test_expire_by_idle_age_takes_only_sessions_idle_that_long(
        self, store: SessionStore
    ) -> None:
        await _session(store, "idle")
        await _session(store, "active", last=_recent())
        await _session(store, "empty-old", last=None)
        await _session(store, "empty-new", created=_recent(), last=None)
        report = await apply(store, IDLE)
        assert sorted(g.session_id for g in report.gone) == ["empty-old", "idle"]
        assert await _ids(store) == ["active", "empty-new"]
        assert report.ok
        assert await store.integrity() == []

    async def test_expire_by_creation_takes_only_sessions_created_before(
        self, store: SessionStore
    ) -> None:
        await _session(store, "early", created="2024-12-31T23:59:59Z")
        await _session(store, "on-the-day", created="2025-01-01T00:00:00Z")
        await _session(store, "late-offset", created="2025-01-01T00:30:00+01:00")  # 23:30 UTC
        report = await apply(store, Policy(created_before="2025-01-01T00:00:00Z"))
        assert sorted(g.session_id for g in report.gone) == ["early", "late-offset"]
        assert await _ids(store) == ["on-the-day"]

    async def test_owner_and_tags_narrow_the_choice_and_every_tag_is_needed(
        self, store: SessionStore
    ) -> None:
        await _session(store, "a-both", owner="alice", tags=("scratch", "ci"))
        await _session(store, "a-one", owner="alice", tags=("scratch",))
        await _session(store, "b-both", owner="bob", tags=("ci", "scratch"))
        await _session(store, "none-both", tags=("scratch", "ci"))
        policy = Policy(owner="alice", tags=["scratch", "ci"])
        report = await apply(store, policy)
        assert [g.session_id for g in report.gone] == ["a-both"]
        assert await _ids(store) == ["a-one", "b-both", "none-both"]

    async def test_keep_newest_keeps_each_owners_newest_by_creation(
        self, store: SessionStore
    ) -> None:
        for owner in ("alice", "bob", None):
            for month in range(1, 5):
                name = f"{owner or 'nobody'}-{month}"
                await _session(store, name, created=f"2021-0{month}-01T00:00:00Z", owner=owner)
        # The oldest by creation, but written to last: creation decides.
        await store.append("alice-1", message("late", "hi", "2021-12-01T00:00:00Z"))
        report = await apply(store, Policy(action="expire", keep_newest=2))
        left = {(left.session_id, left.reason) for left in report.left}
        assert ("alice-4", "among the newest 2 of alice's sessions; kept") in left
        assert ("nobody-3", "among the newest 2 of sessions without an owner; kept") in left
        assert await _ids(store) == sorted(
            f"{who}-{month}" for who in ("alice", "bob", "nobody") for month in (3, 4)
        )

    async def test_keep_newest_with_an_owner_leaves_the_other_owners_alone(
        self, store: SessionStore
    ) -> None:
        for owner in ("alice", "bob"):
            for month in range(1, 4):
                await _session(store, f"{owner}-{month}", created=f"2021-0{month}-01T00:00:00Z")
                await store.erase(f"{owner}-{month}", reason="remade with an owner")
                meta = SessionMeta(
                    id=f"{owner}-{month}-o", created_at=f"2021-0{month}-01T00:00:00Z", owner=owner
                )
                await store.create(meta)
        await apply(store, Policy(owner="bob", keep_newest=1))
        assert await _ids(store) == ["alice-1-o", "alice-2-o", "alice-3-o", "bob-3-o"]

    async def test_keep_newest_keeps_a_session_whose_creation_is_no_time(
        self, store: SessionStore
    ) -> None:
        # It cannot be ranked: it may be the newest, so it is never taken blind.
        await _session(store, "dan-1", created="2021-01-01T00:00:00Z", owner="dan")
        await _session(store, "dan-2", created="2021-02-01T00:00:00Z", owner="dan")
        await _session(store, "dan-untold", created="last tuesday", owner="dan")
        report = await apply(store, Policy(owner="dan", keep_newest=1))
        assert [going.session_id for going in report.gone] == ["dan-1"]
        left = {left.session_id: left for left in report.left}
        assert "its age cannot be told" in left["dan-untold"].reason
        assert not left["dan-untold"].fault
        assert await _ids(store) == ["dan-2", "dan-untold"]

    # ------------------------------------------------------------- the plan

    async def test_a_plan_gives_sizes_digests_and_reasons_and_writes_nothing(
        self, store: SessionStore
    ) -> None:
        await _session(store, "idle", owner="alice")
        await store.append("idle", message("idle-2", "more", OLD))
        await _session(store, "active", last=_recent())
        before = {session_id: await raw(store, session_id) for session_id in ("idle", "active")}
        planned = await plan(store, IDLE)
        [going] = planned.going
        data = await blocks(store, "idle")
        assert (going.session_id, going.owner, going.entries) == ("idle", "alice", 2)
        assert (going.bytes, going.digest) == (len(data), digest(data))
        assert (going.created_at, going.last_activity) == (OLD, OLD)
        assert re.fullmatch(r"idle \d{4,}d", going.reason), going.reason
        assert (planned.held, planned.bytes, planned.entries) == (2, len(data), 2)
        assert {s: await raw(store, s) for s in before} == before
        assert await store.erasures() == []

    async def test_each_expired_session_leaves_one_erasure_with_the_policy_reason(
        self, store: SessionStore
    ) -> None:
        await _session(store, "a")
        await _session(store, "b")
        sizes = {g.session_id: g.digest for g in (await plan(store, IDLE)).going}
        report = await apply(store, IDLE)
        erasures = await store.erasures()
        assert sorted(e.name for e in erasures) == ["a", "b"]
        assert {e.reason for e in erasures} == {"expired by policy: idle 30d"}
        assert {e.name: e.digest for e in erasures} == sizes
        assert report.bytes == sum(g.bytes for g in report.gone) > 0
        custom = Policy(created_before="2100-01-01T00:00:00Z", reason="ticket #12")
        await _session(store, "c")
        await apply(store, custom)
        assert (await store.erasures())[-1].reason == "ticket #12"

    # ------------------------------------------------------------- fork families

    @needs(Capability.BRANCHES)
    async def test_a_family_chosen_whole_goes_whole_forks_first(self, store: SessionStore) -> None:
        await _family(store)
        report = await apply(store, IDLE)
        order = [e.name for e in await store.erasures()]
        assert sorted(order) == ["alone", "root", "root-fork", "root-fork-fork"]
        assert order.index("root-fork-fork") < order.index("root-fork") < order.index("root")
        assert [g.session_id for g in report.gone] == [g.session_id for g in report.plan.going]
        assert await store.list() == []
        assert await store.integrity() == []

    @needs(Capability.BRANCHES)
    async def test_a_family_not_chosen_whole_stays_whole_and_says_why(
        self, store: SessionStore
    ) -> None:
        await _family(store, fork_last=_recent())  # the youngest fork is active
        before = {s: await raw(store, s) for s in ("root", "root-fork", "root-fork-fork")}
        report = await apply(store, IDLE)
        assert [g.session_id for g in report.gone] == ["alone"]
        left = {left.session_id: left for left in report.left}
        assert sorted(left) == ["root", "root-fork"]
        assert all(not issue.fault for issue in left.values())
        assert "root-fork-fork not chosen; left whole" in left["root"].reason
        assert {s: await raw(store, s) for s in before} == before
        assert await store.integrity() == []

    @needs(Capability.BRANCHES)
    async def test_keep_newest_keeping_a_fork_keeps_its_family(self, store: SessionStore) -> None:
        await _session(store, "root", created="2021-01-01T00:00:00Z")
        await store.fork("root", meta=SessionMeta(id="fork", created_at="2021-06-01T00:00:00Z"))
        await _session(store, "other", created="2021-03-01T00:00:00Z")
        report = await apply(store, Policy(keep_newest=1))
        assert [g.session_id for g in report.gone] == ["other"]
        assert await _ids(store) == ["fork", "root"]

    @needs(Capability.BRANCHES)
    async def test_a_session_that_does_not_read_back_stays_as_a_fault_with_its_family(
        self, backend: Backend, store: SessionStore
    ) -> None:
        if backend.damage is None:
            pytest.skip("this backend holds nothing that does not decode")
        await _family(store)
        await backend.damage("root-fork")
        store.drop_caches()
        report = await apply(store, IDLE)
        assert [g.session_id for g in report.gone] == ["alone"]
        left = {left.session_id: left for left in report.left}
        assert sorted(left) == ["root", "root-fork", "root-fork-fork"]
        assert left["root-fork"].fault
        assert "does not read back" in left["root-fork"].reason
        assert not left["root"].fault
        assert not report.ok
        listed = sorted(summary.id for summary in await store.summaries(limit=None))
        assert listed == ["root", "root-fork", "root-fork-fork"]

    # ------------------------------------------------------------- runs again, and at once

    @needs(Capability.BRANCHES)
    async def test_a_rerun_with_nothing_left_does_nothing(self, store: SessionStore) -> None:
        await _family(store)
        await apply(store, IDLE)
        erasures = await store.erasures()
        again = await apply(store, IDLE)
        assert (again.gone, again.already_gone, again.left, again.ok) == ([], [], [], True)
        assert await store.erasures() == erasures

    @needs(Capability.BRANCHES)
    async def test_a_rerun_after_a_family_partly_erased_finishes_it(
        self, store: SessionStore
    ) -> None:
        await _family(store)
        await store.erase("root-fork-fork", reason="a run killed after its first erase")
        report = await apply(store, IDLE)
        assert sorted(g.session_id for g in report.gone) == ["alone", "root", "root-fork"]
        assert await store.list() == []
        assert await store.integrity() == []

    async def test_a_session_written_to_after_the_plan_stays_with_its_family(
        self, store: SessionStore
    ) -> None:
        await _session(store, "a")
        await _session(store, "b")

        async def meanwhile(planned: Plan) -> bool:
            assert [g.session_id for g in planned.going] == ["a", "b"]
            await store.append("a", message("a-2", "still here", OLD))
            return True

        report = await apply(store, IDLE, confirm=meanwhile)
        assert [g.session_id for g in report.gone] == ["b"]
        [left] = report.left
        assert (left.session_id, left.fault) == ("a", False)
        assert left.reason.startswith("written to since planned")
        assert await _ids(store) == ["a"]

    async def test_a_session_erased_after_the_plan_is_already_gone_not_erased_twice(
        self, store: SessionStore
    ) -> None:
        await _session(store, "a")
        await _session(store, "b")

        async def meanwhile(_: Plan) -> bool:
            await store.erase("a", reason="by another")
            return True

        report = await apply(store, IDLE, confirm=meanwhile)
        assert (report.already_gone, [g.session_id for g in report.gone]) == (["a"], ["b"])
        assert report.ok
        assert [(e.name, e.reason) for e in await store.erasures()] == [
            ("a", "by another"),
            ("b", "expired by policy: idle 30d"),
        ]

    async def test_a_declined_plan_does_nothing(self, store: SessionStore) -> None:
        await _session(store, "a")

        async def no(_: Plan) -> bool:
            return False

        report = await apply(store, IDLE, confirm=no)
        assert (report.confirmed, report.gone) == (False, [])
        assert await _ids(store) == ["a"]

    @needs(Capability.BRANCHES)
    @pytest.mark.parametrize("action", ["expire", "retire"])
    async def test_two_runs_at_once_never_act_twice(
        self, backend: Backend, store: SessionStore, tmp_path: Path, action: str
    ) -> None:
        for n in range(4):
            await _session(store, f"s{n}")
        await _family(store)
        expected = {meta.id: await blocks(store, meta.id) for meta in await store.list()}
        policy = Policy(action="retire", to=tmp_path, idle_for=IDLE.idle_for)
        if action == "expire":
            policy = IDLE
        # A persistent store: a second object on the same storage, as a second
        # process would have; in memory the storage is the object.
        other = await backend.open() if backend.persistent else store
        planned = 0
        both = asyncio.Event()

        async def once_both_planned(_: Plan) -> bool:
            nonlocal planned
            planned += 1
            if planned == 2:
                both.set()
            await both.wait()  # each acts on a plan of every session
            return True

        try:
            first, second = await asyncio.gather(
                apply(store, policy, confirm=once_both_planned),
                apply(other, policy, confirm=once_both_planned),
            )
        finally:
            if other is not store:
                await other.close()
        taken = [g.session_id for g in first.gone] + [g.session_id for g in second.gone]
        assert sorted(taken) == sorted(expected)  # each once, by one run
        # What one run found gone, the other took: every session, once.
        assert set(first.already_gone) == {g.session_id for g in second.gone}
        assert set(second.already_gone) == {g.session_id for g in first.gone}
        assert first.ok, first.left
        assert second.ok, second.left
        erased = [erasure.name for erasure in await store.erasures()]
        assert sorted(erased) == sorted(expected)  # one record each
        assert await store.list() == []
        assert await store.integrity() == []
        if action == "retire":
            copies = {
                p.name.removesuffix(".jsonl"): p.read_bytes()
                for p in (tmp_path / "sessions").iterdir()
            }
            assert copies == expected  # one copy each, whole, no temporary left

    # ------------------------------------------------------------- retire

    async def test_a_retire_policy_archives_each_session_then_erases_it(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        await _session(store, "old", owner="alice")
        await _session(store, "mine", owner="bob")
        data = await blocks(store, "old")
        policy = Policy(action="retire", to=tmp_path / "archive", owner="alice")
        report = await apply(store, policy)
        assert [g.session_id for g in report.gone] == ["old"]
        assert report.archive == str((tmp_path / "archive").absolute())
        assert (tmp_path / "archive" / "sessions" / "old.jsonl").read_bytes() == data
        [erasure] = await store.erasures()
        assert erasure.reason == f"retired to {report.archive}"
        assert await _ids(store) == ["mine"]
