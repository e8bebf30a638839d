"""Titles in the archive: ``titles/<id>.jsonl`` beside ``sessions/``, every change a line.

A title chosen after creation never changes the header, so it travels in a
file of its own, in canonical form, oldest first, the way a head's file
does: incremental, checked as a prefix, refused when it differs. Imported,
each change keeps its time (`SessionStore.import_titles`).
"""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    ArchiveError,
    MemoryStore,
    SessionMeta,
    SessionStore,
    TitleChange,
    encode_line,
    open_store,
    retire,
)
from sessionstore.archive import ArchiveReport, export_archive, import_archive
from sessionstore.archive.exporting import export_chosen
from sessionstore.testing.common import message
from tests.archive.helpers import tree
from tests.kinds import STORE_KINDS, StoreTargets


@pytest.fixture(params=STORE_KINDS)
async def store(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(request.param)) as opened:
        yield opened


async def fill_titles(store: SessionStore) -> list[TitleChange]:
    """A session with every header field and three later titles (one back to
    the header's), and one never retitled; the titled one's changes."""
    titled = SessionMeta(
        id="titled",
        created_at="2025-01-01T00:00:00+00:00",
        title="from the header",
        owner="ann",
        tags=("trip", "train"),
        metadata={"project": ["x", {"n": 1}]},
    )
    await store.create(titled)
    await store.append("titled", message("e1", "plan a trip"))
    await store.create(SessionMeta(id="untitled", created_at="2025-01-01T00:00:00+00:00"))
    return [
        await store.set_title("titled", "Trip to Lisbon"),
        await store.set_title("titled", None),
        await store.set_title("titled", "Lisbon, by train"),
    ]


def titles_file(archive: Path, session_id: str) -> Path:
    return archive / "titles" / f"{session_id}.jsonl"


def refusals(report: object) -> dict[str, tuple[int | None, str]]:
    assert isinstance(report, ArchiveReport)
    return {Path(issue.file).name: (issue.line, issue.reason) for issue in report.refused}


@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_titles_travel_with_their_session_and_their_times(
    tmp_path: Path, kind: str, store_targets: StoreTargets
) -> None:
    async with open_store(store_targets.new(kind)) as first:
        changes = await fill_titles(first)
        report = await export_archive(first, tmp_path / "one")
    assert report.titles == 3
    assert titles_file(tmp_path / "one", "titled").read_bytes() == b"".join(
        map(encode_line, changes)
    )
    assert not titles_file(tmp_path / "one", "untitled").exists()  # no change, no file
    async with open_store(store_targets.new(kind)) as second:
        assert (await import_archive(second, tmp_path / "one")).titles == 3
        assert await second.titles("titled") == changes  # their times, not the import's
        summaries = {s.id: s for s in await second.summaries(limit=None)}
        assert summaries["titled"].title == "Lisbon, by train"
        assert summaries["untitled"].title is None
        assert (await import_archive(second, tmp_path / "one")).titles == 0  # once
        await export_archive(second, tmp_path / "two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


async def test_export_gives_a_titles_file_only_the_changes_it_lacks(
    store: SessionStore, tmp_path: Path
) -> None:
    changes = await fill_titles(store)
    await export_archive(store, tmp_path)
    changes.append(await store.set_title("titled", "Porto instead"))
    report = await export_archive(store, tmp_path)
    assert (report.titles, report.entries) == (1, 0)
    assert titles_file(tmp_path, "titled").read_bytes() == b"".join(map(encode_line, changes))
    await store.set_title("untitled", "now titled")  # a first change: a new file
    assert (await export_archive(store, tmp_path)).titles == 1


async def test_import_adds_only_the_changes_the_store_lacks(
    store: SessionStore, tmp_path: Path
) -> None:
    source = MemoryStore()
    changes = await fill_titles(source)
    await export_archive(source, tmp_path)
    await import_archive(store, tmp_path)
    changes.append(await source.set_title("titled", "later"))
    await export_archive(source, tmp_path)
    assert (await import_archive(store, tmp_path)).titles == 1
    assert await store.titles("titled") == changes


async def test_a_titles_file_that_is_not_a_prefix_is_refused_and_left_as_it_is(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_titles(store)
    await export_archive(store, tmp_path)
    path = titles_file(tmp_path, "titled")
    other = TitleChange(session_id="titled", title="another story", at="2025-01-01T00:00:00Z")
    edited = encode_line(other) + path.read_bytes()
    path.write_bytes(edited)
    with pytest.raises(ArchiveError) as caught:
        await export_archive(store, tmp_path)
    [(line, reason)] = refusals(caught.value.report).values()
    assert line is None  # the step's file is the session's: the reason names the titles'
    assert str(path) in reason
    assert "line 1" in reason
    assert "differs from the stored titles" in reason
    assert path.read_bytes() == edited


@pytest.mark.parametrize(
    ("name", "lines", "line", "reason"),
    [
        ("titled", [b'{"title":"x","session_id":"titled","at":"t"}'], 1, "canonical form"),
        ("titled", [b'{"session_id":"untitled","at":"t"}'], 1, "session 'untitled'"),
        ("titled", [b"not json"], 1, ""),
        ("nowhere", [b'{"session_id":"nowhere","at":"t"}'], None, "nowhere"),
    ],
    ids=["not-canonical", "another-session", "not-json", "no-such-session"],
)
async def test_import_refuses_a_titles_file_it_could_not_export_back_the_same(
    store: SessionStore,
    tmp_path: Path,
    name: str,
    lines: list[bytes],
    line: int | None,
    reason: str,
) -> None:
    await store.create(SessionMeta(id="titled"))
    await store.create(SessionMeta(id="untitled"))
    path = titles_file(tmp_path, name)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(part + b"\n" for part in lines))
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, tmp_path)
    [(refused_line, refused_reason)] = refusals(caught.value.report).values()
    assert refused_line == line
    assert reason in refused_reason
    assert await store.titles("titled") == []


async def test_retire_takes_the_titles_along_and_import_brings_them_back(
    store: SessionStore, tmp_path: Path
) -> None:
    changes = await fill_titles(store)
    report = await retire(store, tmp_path, sessions=["titled"])
    assert report.ok
    assert report.retired == ["titled"]
    assert titles_file(tmp_path, "titled").read_bytes() == b"".join(map(encode_line, changes))
    await import_archive(store, tmp_path)
    assert await store.titles("titled") == changes


async def test_retire_leaves_a_session_whose_archived_titles_differ(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_titles(store)
    await export_archive(store, tmp_path)
    other = TitleChange(session_id="titled", title="another story", at="2025-01-01T00:00:00Z")
    titles_file(tmp_path, "titled").write_bytes(encode_line(other))
    report = await retire(store, tmp_path, sessions=["titled"])
    assert report.retired == []
    [issue] = report.skipped
    assert issue.fault
    assert "titles" in issue.reason
    assert len(await store.titles("titled")) == 3


async def test_retire_leaves_a_session_retitled_after_its_export(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fill_titles(store)

    async def export_then_retitle(*args: Any, **kwargs: Any) -> ArchiveReport:
        report = await export_chosen(*args, **kwargs)
        await store.set_title("titled", "chosen meanwhile")  # an erase would lose it
        return report

    monkeypatch.setattr("sessionstore.archive.retiring.export_chosen", export_then_retitle)
    report = await retire(store, tmp_path, sessions=["titled"])
    assert report.retired == []
    [issue] = report.skipped
    assert issue.fault
    assert "titles" in issue.reason
    assert "differs from the store at line 4" in issue.reason  # the change made meanwhile
    assert (await store.titles("titled"))[-1].title == "chosen meanwhile"
