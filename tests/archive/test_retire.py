"""`retire`: sessions move from the store into an archive, checked, never lost.

Every test runs on every store kind through the public store protocol only;
the kill test of a real process is in ``test_retire_kill.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    ConfigurationError,
    Erasure,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    StorageError,
    import_archive,
    open_store,
    retire,
)
from sessionstore.testing.common import message, raw
from tests.forks import FORKS, SESSIONS, fill_forks
from tests.kinds import STORE_KINDS, StoreTargets

OLD = "2020-01-01T00:00:00+00:00"
LONG_AGO = "2020-06-01T00:00:00Z"


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(kind: str, store_targets: StoreTargets) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(kind)) as opened:
        yield opened


async def make(
    store: SessionStore, session_id: str, created_at: str = OLD, entries: int = 2
) -> None:
    await store.create(SessionMeta(id=session_id, created_at=created_at))
    await store.append_many(
        session_id, [message(f"{session_id}-{n}", f"text {n}", OLD) for n in range(entries)]
    )


async def snapshot(store: SessionStore) -> dict[str, list[str]]:
    """Every session's stored lines."""
    return {meta.id: await raw(store, meta.id) for meta in await store.list()}


def archived(archive: Path, session_id: str) -> bytes:
    return (archive / "sessions" / f"{session_id}.jsonl").read_bytes()


def file_of(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


async def stored_ids(store: SessionStore) -> set[str]:
    return {meta.id for meta in await store.list()}


# ------------------------------------------------------------ choosing


async def test_without_a_filter_nothing_is_retired(store: SessionStore, tmp_path: Path) -> None:
    await make(store, "s1")
    with pytest.raises(ConfigurationError, match="never retires everything"):
        await retire(store, tmp_path / "archive")
    assert await stored_ids(store) == {"s1"}
    assert not (tmp_path / "archive").exists()


@pytest.mark.parametrize(
    ("options", "message_part"),
    [
        ({"before": datetime(2026, 1, 1)}, "aware datetime"),
        ({"before": "last tuesday"}, "not an RFC 3339 time"),
        ({"idle_for": timedelta(days=-1)}, "timedelta of 0 or more"),
        ({"sessions": "s1"}, "list of ids"),
        ({"idle_for": timedelta.max}, "reaches back before the year 1"),  # was OverflowError
    ],
    ids=["naive", "not-a-time", "negative-idle", "one-string", "idle-before-year-1"],
)
async def test_an_ambiguous_option_is_refused_before_anything_moves(
    store: SessionStore, tmp_path: Path, options: dict[str, Any], message_part: str
) -> None:
    await make(store, "s1")
    with pytest.raises(ConfigurationError, match=message_part):
        await retire(store, tmp_path / "archive", **options)
    assert await stored_ids(store) == {"s1"}


async def test_before_compares_instants_not_strings(store: SessionStore, tmp_path: Path) -> None:
    # 23:00 UTC the day before: earlier, although its text sorts later.
    await make(store, "earlier", "2026-01-01T01:00:00+02:00")
    await make(store, "same-instant", "2026-01-01T00:00:00.000Z")
    # 00:30 UTC: later, although its text sorts earlier.
    await make(store, "later", "2025-12-31T23:30:00-01:00")
    report = await retire(store, tmp_path / "archive", before="2026-01-01T00:00:00Z")
    assert report.retired == ["earlier"]
    assert await stored_ids(store) == {"same-instant", "later"}


async def test_before_takes_an_aware_datetime(store: SessionStore, tmp_path: Path) -> None:
    await make(store, "old", "2026-01-01T00:00:00Z")
    await make(store, "new", "2026-03-01T00:00:00Z")
    report = await retire(store, tmp_path / "archive", before=datetime(2026, 2, 1, tzinfo=UTC))
    assert report.retired == ["old"]


async def test_a_session_whose_age_cannot_be_told_stays_and_is_named(
    store: SessionStore, tmp_path: Path
) -> None:
    await make(store, "undated", "")
    await make(store, "garbled", "yesterday-ish")
    await make(store, "old")
    report = await retire(store, tmp_path / "archive", before="2026-01-01T00:00:00Z")
    assert report.retired == ["old"]
    reasons = {issue.session_id: issue for issue in report.skipped}
    assert set(reasons) == {"undated", "garbled"}
    assert "age cannot be told" in reasons["garbled"].reason
    assert not any(issue.fault for issue in report.skipped)  # left by rule, not a fault
    assert report.ok


async def test_idle_for_counts_from_the_last_entry_or_the_creation(
    store: SessionStore, tmp_path: Path
) -> None:
    recent = datetime.now(UTC).isoformat()
    await make(store, "idle", OLD)
    await store.create(SessionMeta(id="created-long-ago-but-active", created_at=OLD))
    await store.append("created-long-ago-but-active", message("a1", "just now", recent))
    await make(store, "empty-and-old", OLD, entries=0)
    await make(store, "empty-and-new", recent, entries=0)
    report = await retire(store, tmp_path / "archive", idle_for=timedelta(days=90))
    assert sorted(report.retired) == ["empty-and-old", "idle"]
    assert await stored_ids(store) == {"created-long-ago-but-active", "empty-and-new"}


async def test_filters_combine_as_and(store: SessionStore, tmp_path: Path) -> None:
    await make(store, "old-named", OLD)
    await make(store, "old-unnamed", OLD)
    await make(store, "new-named", "2999-01-01T00:00:00Z")
    report = await retire(
        store, tmp_path / "archive", before=LONG_AGO, sessions=["old-named", "new-named"]
    )
    assert report.retired == ["old-named"]
    assert await stored_ids(store) == {"old-unnamed", "new-named"}


async def test_a_named_session_not_in_the_store_is_a_fault(
    store: SessionStore, tmp_path: Path
) -> None:
    report = await retire(store, tmp_path / "archive", sessions=["nowhere"])
    assert [(i.session_id, i.fault) for i in report.skipped] == [("nowhere", True)]
    assert not report.ok


# ------------------------------------------------------------ moving, checked


async def test_retired_sessions_leave_the_store_and_import_back_byte_for_byte(
    store: SessionStore, tmp_path: Path
) -> None:
    await make(store, "s1", entries=3)
    await make(store, "s2", entries=0)
    await make(store, "stays", "2999-01-01T00:00:00Z")
    before = await snapshot(store)
    report = await retire(store, tmp_path / "archive", before=LONG_AGO)
    assert sorted(report.retired) == ["s1", "s2"]
    assert report.ok
    assert not report.skipped
    assert report.bytes == sum(len(file_of(before[s])) for s in ("s1", "s2"))
    assert await stored_ids(store) == {"stays"}
    for session_id in ("s1", "s2"):
        with pytest.raises(SessionNotFoundError):
            await raw(store, session_id)
    await import_archive(store, tmp_path / "archive")
    assert await snapshot(store) == before


async def test_each_erasure_names_the_archive_and_its_digest_is_the_copy_s(
    store: SessionStore, tmp_path: Path
) -> None:
    await make(store, "s1")
    report = await retire(store, tmp_path / "archive", sessions=["s1"])
    assert report.archive == str((tmp_path / "archive").absolute())
    [erasure] = await store.erasures()
    assert erasure.reason == f"retired to {report.archive}"
    copy = archived(tmp_path / "archive", "s1")
    assert erasure.digest == hashlib.blake2b(copy, digest_size=32).hexdigest()
    assert erasure.lines == 2


async def test_forks_are_retired_before_the_sessions_they_came_from(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_forks(store)
    before = await snapshot(store)
    report = await retire(store, tmp_path / "archive", sessions=SESSIONS)
    assert sorted(report.retired) == SESSIONS
    assert report.ok
    erased = [e.name for e in await store.erasures()]
    for fork, parent in FORKS.items():
        assert erased.index(fork) < erased.index(parent), (fork, parent)
    assert await stored_ids(store) == set()
    await import_archive(store, tmp_path / "archive")
    assert await snapshot(store) == before


async def test_a_session_whose_fork_is_not_chosen_stays_with_its_ancestors(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_forks(store)
    # "deeper" is not chosen: "deep", "middle" and "root" above it stay.
    chosen = [s for s in SESSIONS if s != "deeper"]
    report = await retire(store, tmp_path / "archive", sessions=chosen)
    left = {issue.session_id: issue for issue in report.skipped}
    assert set(left) == {"deep", "middle", "root"}
    assert "deeper" in left["deep"].reason
    assert not left["deep"].fault
    assert report.ok
    assert await stored_ids(store) == {"deeper", "deep", "middle", "root"}
    assert sorted(report.retired) == sorted(set(chosen) - set(left))


async def test_an_archive_copy_that_differs_is_never_trusted(
    store: SessionStore, tmp_path: Path
) -> None:
    await make(store, "s1")
    await make(store, "s2")
    foreign = b'{"id":"s1","version":1}\n'
    (tmp_path / "archive" / "sessions").mkdir(parents=True)
    (tmp_path / "archive" / "sessions" / "s1.jsonl").write_bytes(foreign)
    report = await retire(store, tmp_path / "archive", before=LONG_AGO)
    assert report.retired == ["s2"]
    [issue] = report.skipped
    assert issue.session_id == "s1"
    assert issue.fault
    assert "not erased" in issue.reason
    assert not report.ok
    assert await stored_ids(store) == {"s1"}
    assert archived(tmp_path / "archive", "s1") == foreign  # left as it was


async def test_a_session_that_does_not_read_back_is_not_retired(
    kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    backend = store_targets.backend(kind)
    if backend.damage is None:
        pytest.skip(f"{kind} stores cannot be damaged behind their back")
    store = await backend.open()
    async with store:
        await make(store, "broken")
        await make(store, "sound")
        await backend.damage("broken")
        report = await retire(store, tmp_path / "archive", before=LONG_AGO)
        assert report.retired == ["sound"]
        assert [(i.session_id, i.fault) for i in report.skipped] == [("broken", True)]
        assert "broken" in {summary.meta.id for summary in await store.summaries(limit=None)}


async def test_an_append_racing_the_erase_keeps_the_session(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make(store, "s1")
    real_erase = store.erase

    async def append_then_erase(session_id: str, *, reason: str, digest: str | None) -> Erasure:
        await store.append(session_id, message("late", "appended after the check"))
        return await real_erase(session_id, reason=reason, digest=digest)

    monkeypatch.setattr(store, "erase", append_then_erase)
    report = await retire(store, tmp_path / "archive", sessions=["s1"])
    assert report.retired == []
    assert [(i.session_id, i.fault) for i in report.skipped] == [("s1", True)]
    assert "changed" in report.skipped[0].reason
    assert not report.ok
    assert (await store.load("s1"))[-1] == message("late", "appended after the check")
    assert await store.erasures() == []


async def test_progress_counts_each_session_exported_then_checked(
    store: SessionStore, tmp_path: Path
) -> None:
    for n in range(3):
        await make(store, f"s{n}")
    calls: list[tuple[int, int]] = []
    await retire(store, tmp_path / "archive", before=LONG_AGO, progress=lambda *c: calls.append(c))
    assert calls == [(n, 6) for n in range(1, 7)]


# ------------------------------------------------------------ crashes


def failing_once(store: SessionStore, after: int) -> Callable[..., Any]:
    """``store.erase`` that raises a `StorageError` on its call number ``after``
    (1-based), before erasing anything: a crash between export and erase."""
    real_erase = store.erase
    calls = 0

    async def erase(session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        nonlocal calls
        calls += 1
        if calls == after:
            raise StorageError("injected: the process died here")
        return await real_erase(session_id, reason=reason, digest=digest)

    return erase


@pytest.mark.parametrize("after", [1, 4, 8])
async def test_a_run_stopped_between_export_and_erase_is_finished_by_the_next(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    await fill_forks(store)
    before = await snapshot(store)
    archive = tmp_path / "archive"
    monkeypatch.setattr(store, "erase", failing_once(store, after))
    with pytest.raises(StorageError, match="injected"):
        await retire(store, archive, sessions=SESSIONS)
    # Every session is in the store, or in the archive byte for byte, or both.
    now = await snapshot(store)
    for session_id, lines in before.items():
        if session_id not in now:
            assert archived(archive, session_id) == file_of(lines), session_id
        else:
            assert now[session_id] == lines
    assert len(now) == len(SESSIONS) - (after - 1)
    report = await retire(store, archive, sessions=SESSIONS)
    assert report.ok
    assert sorted(report.retired) == sorted(now)  # what the first run left
    assert sum(not i.fault for i in report.skipped) == after - 1  # the first run's
    assert await stored_ids(store) == set()
    await import_archive(store, archive)
    assert await snapshot(store) == before


async def test_running_again_after_everything_is_retired_changes_nothing(
    store: SessionStore, tmp_path: Path
) -> None:
    await make(store, "s1")
    await retire(store, tmp_path / "archive", sessions=["s1"])
    report = await retire(store, tmp_path / "archive", sessions=["s1"])
    assert report.retired == []
    assert [(i.session_id, i.fault) for i in report.skipped] == [("s1", False)]
    assert "already retired" in report.skipped[0].reason
    assert report.ok
