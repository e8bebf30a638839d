"""The archive in hostile trees: FIFOs, links and other files where archive
files are read or written, a store holding what it cannot list, a full
disk, other local users, journals too large to hold."""

from __future__ import annotations

import os
import stat
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import (
    ArchiveError,
    FileJournal,
    JsonlStore,
    MemoryStore,
    SessionMeta,
    SessionStore,
    StorageError,
    encode_line,
)
from sessionstore.archive import ArchiveReport, export_archive, import_archive
from sessionstore.testing.contract import message
from sessionstore.testing.journal_contract import header, post
from tests.hostile import bounded, disk_fills_on, make_fifo, run_capped


@pytest.fixture
async def store() -> AsyncIterator[SessionStore]:
    async with MemoryStore() as opened:
        yield opened


def session_bytes(session_id: str, *entry_ids: str) -> bytes:
    meta = encode_line(SessionMeta(id=session_id))
    return meta + b"".join(encode_line(message(e, "x")) for e in entry_ids)


def refusals(report: object) -> dict[str, str]:
    assert isinstance(report, ArchiveReport)
    return {issue.file: issue.reason for issue in report.refused}


def skipped(report: ArchiveReport) -> dict[str, str]:
    return {issue.file: issue.reason for issue in report.skipped}


# ---------------------------------------------------------------- import


async def test_import_skips_fifos_by_name_never_opening_them(
    store: SessionStore, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    (archive / "sessions").mkdir(parents=True)
    (archive / "sessions" / "fine.jsonl").write_bytes(session_bytes("fine", "e1"))
    session_fifo = make_fifo(archive / "sessions" / "pipe.jsonl")
    journal_fifo = make_fifo(archive / "journals" / "j" / "session_journal.jsonl")

    report = await bounded(import_archive(store, archive), session_fifo, journal_fifo)
    assert skipped(report) == {
        str(session_fifo): "a FIFO, not a session file",
        str(journal_fifo): "a FIFO, not a journal file",
    }
    assert (report.sessions, report.journals) == (1, 0)
    assert await store.journals() == []


async def test_import_reports_every_other_file_it_does_not_read(
    store: SessionStore, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    sessions = archive / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "fine.jsonl").write_bytes(session_bytes("fine", "e1"))
    (sessions / ".fine.jsonl.tmp-0123").write_bytes(b"an unfinished export")
    (sessions / "notes.txt").write_bytes(b"not a session")
    (sessions / "sub.jsonl").mkdir()
    (archive / "elsewhere").mkdir()
    (sessions / "linkdir.jsonl").symlink_to(archive / "elsewhere")
    (sessions / "broken.jsonl").symlink_to(archive / "nothing")
    (archive / "journals").mkdir()
    (archive / "journals" / "stray-file").write_bytes(b"")

    report = await import_archive(store, archive)
    assert skipped(report) == {
        str(sessions / ".fine.jsonl.tmp-0123"): (
            "a dot-named file (an unfinished export's temporary?)"
        ),
        str(sessions / "notes.txt"): "not named *.jsonl or *.sealed",
        str(sessions / "sub.jsonl"): "a directory, not a session file",
        str(sessions / "linkdir.jsonl"): "a symbolic link to a directory, not a session file",
        str(sessions / "broken.jsonl"): "a broken symbolic link, not a session file",
        str(archive / "journals" / "stray-file"): "a regular file, not a journal's directory",
    }
    assert report.refused == []
    assert [meta.id for meta in await store.list()] == ["fine"]


async def test_import_refuses_links_leading_out_of_the_archive(
    store: SessionStore, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_bytes(session_bytes("secret", "e1"))
    FileJournal.in_dir(outside / "agent").path.parent.mkdir()
    FileJournal.in_dir(outside / "agent").path.write_bytes(encode_line(post(1)))
    archive = tmp_path / "archive"
    sessions = archive / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "secret.jsonl").symlink_to(outside / "secret.jsonl")
    (sessions / "inside.jsonl").symlink_to(archive / "real" / "inside.jsonl")
    (archive / "real").mkdir()
    (archive / "real" / "inside.jsonl").write_bytes(session_bytes("inside", "e1"))
    (archive / "journals" / "linked").mkdir(parents=True)
    (archive / "journals" / "linked" / "session_journal.jsonl").symlink_to(
        FileJournal.in_dir(outside / "agent").path
    )
    (archive / "journals" / "agent").symlink_to(outside / "agent")

    with pytest.raises(ArchiveError, match="leading out of the archive") as caught:
        await import_archive(store, archive)
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    leading_out = "a symbolic link leading out of the archive (to {}); not followed"
    assert refusals(report) == {
        str(sessions / "secret.jsonl"): leading_out.format(outside / "secret.jsonl"),
        str(archive / "journals" / "linked" / "session_journal.jsonl"): leading_out.format(
            FileJournal.in_dir(outside / "agent").path
        ),
        str(archive / "journals" / "agent"): leading_out.format(outside / "agent"),
    }
    assert [meta.id for meta in await store.list()] == ["inside"]  # a link inside is read
    assert await store.journals() == []


def test_import_refuses_a_journal_linked_to_dev_zero(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    (archive / "journals" / "j").mkdir(parents=True)
    (archive / "journals" / "j" / "session_journal.jsonl").symlink_to("/dev/zero")
    out = run_capped(
        """
        import asyncio, sys
        from sessionstore import ArchiveError, MemoryStore
        from sessionstore.archive import import_archive
        try:
            asyncio.run(import_archive(MemoryStore(), sys.argv[1]))
        except ArchiveError as exc:
            print("refused:", exc.report.refused[0])
        """,
        str(archive),
    )
    assert "refused: " in out, out
    assert "session_journal.jsonl: a symbolic link leading out of the archive (to /dev/zero)" in out


async def test_a_fifo_opened_after_the_survey_is_refused_not_waited_on(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file when the archive was surveyed, a FIFO when read."""
    from sessionstore.archive import importing

    archive = tmp_path / "archive"
    (archive / "sessions").mkdir(parents=True)
    path = archive / "sessions" / "s.jsonl"
    path.write_bytes(session_bytes("s", "e1"))
    survey = importing._find_sessions

    def then_swapped(root: Path, report: ArchiveReport) -> list[Path]:
        found = survey(root, report)
        path.unlink()
        os.mkfifo(path)
        return found

    monkeypatch.setattr(importing, "_find_sessions", then_swapped)
    with pytest.raises(ArchiveError) as caught:
        await bounded(import_archive(store, archive), path)
    assert refusals(caught.value.report) == {str(path): "not a regular file (a FIFO); not read"}


# ---------------------------------------------------------------- export


async def test_export_refuses_a_fifo_or_link_at_a_destination_and_leaves_it(
    store: SessionStore, tmp_path: Path
) -> None:
    for session_id in ("pipe", "link", "fine"):
        await store.create(SessionMeta(id=session_id))
    await store.journal("j").append(post(1))
    archive = tmp_path / "archive"
    session_fifo = make_fifo(archive / "sessions" / "pipe.jsonl")
    journal_fifo = make_fifo(archive / "journals" / "j" / "session_journal.jsonl")
    target = tmp_path / "target.jsonl"
    target.write_bytes(b"keep me")
    (archive / "sessions" / "link.jsonl").symlink_to(target)

    with pytest.raises(ArchiveError) as caught:
        await bounded(export_archive(store, archive), session_fifo, journal_fifo)
    assert refusals(caught.value.report) == {
        str(session_fifo): "not a regular file (a FIFO); not overwritten",
        str(journal_fifo): "not a regular file (a FIFO); not overwritten",
        str(archive / "sessions" / "link.jsonl"): (
            "not a regular file (a symbolic link, not followed); not overwritten"
        ),
    }
    assert stat.S_ISFIFO(os.lstat(session_fifo).st_mode)
    assert stat.S_ISFIFO(os.lstat(journal_fifo).st_mode)
    assert target.read_bytes() == b"keep me"
    assert (archive / "sessions" / "fine.jsonl").read_bytes() == session_bytes("fine")


async def test_export_writes_nothing_through_a_directory_leading_out(
    store: SessionStore, tmp_path: Path
) -> None:
    await store.journal("j").append(post(1))
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "journals").symlink_to(outside)
    with pytest.raises(ArchiveError, match="leads out of the archive"):
        await export_archive(store, archive)
    assert list(outside.iterdir()) == []


async def test_export_says_what_the_store_holds_but_cannot_list(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    await store.create(SessionMeta(id="good"))
    await store.create(SessionMeta(id="bad"))
    await store.append("bad", message("e1", "its header is gone"))
    bad = store.path("bad")
    bad.write_bytes(b"{torn header\n" + bad.read_bytes().split(b"\n", 1)[1])

    with pytest.raises(ArchiveError, match="could not read 1 stored file") as caught:
        await export_archive(store, tmp_path / "archive")
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    assert not report.ok
    assert len(report.faults) == 1
    assert str(bad) in report.faults[0]
    assert str(bad) in str(caught.value)
    assert report.sessions == 1  # the sound session went out all the same
    assert (tmp_path / "archive" / "sessions" / "good.jsonl").exists()


async def test_export_of_chosen_sessions_does_not_survey_the_store(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    await store.create(SessionMeta(id="good"))
    (tmp_path / "store" / "bad.jsonl").write_bytes(b"")
    report = await export_archive(store, tmp_path / "archive", sessions=["good"])
    assert report.ok
    assert report.faults == []


async def test_an_export_stopped_by_a_full_disk_leaves_no_file_looking_complete(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message(f"e{n}", "x" * 1000) for n in range(50)])
    await store.journal("j").append(post(1))
    archive = tmp_path / "archive"
    free = disk_fills_on(monkeypatch, archive)
    with pytest.raises(StorageError, match="No space left") as caught:
        await export_archive(store, archive)
    assert str(archive / "sessions") in str(caught.value)
    assert sorted(p.name for p in archive.rglob("*") if p.is_file()) == []

    free()
    await export_archive(store, archive, sessions=["s"])
    first = (archive / "sessions" / "s.jsonl").read_bytes()
    await store.append("s", message("late", "y" * 5000))
    disk_fills_on(monkeypatch, archive)
    with pytest.raises(StorageError, match="No space left"):
        await export_archive(store, archive, sessions=["s"])
    assert [p.name for p in (archive / "sessions").iterdir()] == ["s.jsonl"]
    assert (archive / "sessions" / "s.jsonl").read_bytes() == first  # the old, whole


async def test_directories_of_an_export_are_private(store: SessionStore, tmp_path: Path) -> None:
    await store.create(SessionMeta(id="s"))
    await store.journal("j").append(post(1))
    archive = tmp_path / "new" / "archive"
    await export_archive(store, archive)
    for directory in (
        tmp_path / "new",
        archive,
        archive / "sessions",
        archive / "journals",
        archive / "journals" / "j",
    ):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for file in (
        archive / "sessions" / "s.jsonl",
        archive / "journals" / "j" / "session_journal.jsonl",
    ):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file


# ---------------------------------------------------------------- journals, streamed


async def test_journals_travel_without_being_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = JsonlStore(tmp_path / "source")
    await source.journal("j").append(header(0))
    for n in range(1, 4):
        await source.journal("j").append(post(n))
    with source.journal("j").path.open("ab") as file:
        file.write(b"torn")
    data = source.journal("j").path.read_bytes()

    async def whole(self: FileJournal) -> bytes:
        raise AssertionError("read a journal whole")

    monkeypatch.setattr(FileJournal, "read_bytes", whole)
    await export_archive(source, tmp_path / "archive")
    assert (tmp_path / "archive" / "journals" / "j" / "session_journal.jsonl").read_bytes() == data
    target = JsonlStore(tmp_path / "target")
    await import_archive(target, tmp_path / "archive")
    # append_raw ends each line it is given: the torn one too (it reads the same).
    assert target.journal("j").path.read_bytes() == data + b"\n"
    report = await import_archive(target, tmp_path / "archive")  # again: nothing to add
    assert report.journals == 1
    assert target.journal("j").path.read_bytes() == data + b"\n"


async def test_a_journal_import_adds_what_the_store_lacks_and_refuses_a_difference(
    tmp_path: Path,
) -> None:
    lines = [encode_line(post(n)).rstrip(b"\n") for n in range(6)]
    archive = tmp_path / "archive"
    journal_file = archive / "journals" / "j" / "session_journal.jsonl"
    journal_file.parent.mkdir(parents=True)
    journal_file.write_bytes(b"\n".join(lines[:4]) + b"\n")
    store = JsonlStore(tmp_path / "store")

    await store.journal("j").append_raw(*lines[:2])  # a prefix: the rest is added
    await import_archive(store, archive)
    assert store.journal("j").path.read_bytes() == b"\n".join(lines[:4]) + b"\n"

    await store.journal("j").append_raw(*lines[4:])  # longer than the archive: nothing
    report = await import_archive(store, archive)
    assert (report.journals, report.bytes) == (1, journal_file.stat().st_size)
    assert store.journal("j").path.read_bytes() == b"\n".join(lines) + b"\n"

    journal_file.write_bytes(b"\n".join([*lines[:2], b"other", lines[3]]) + b"\n")
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, archive)
    (issue,) = caught.value.report.refused  # type: ignore[attr-defined]
    assert (issue.line, issue.reason) == (3, "differs from the stored journal")
    assert store.journal("j").path.read_bytes() == b"\n".join(lines) + b"\n"


async def test_a_large_journal_is_imported_in_batches_each_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionstore.archive import importing

    monkeypatch.setattr(importing, "_BATCH", 100)
    lines = [encode_line(post(n)).rstrip(b"\n") for n in range(10)]
    archive = tmp_path / "archive"
    journal_file = archive / "journals" / "j" / "session_journal.jsonl"
    journal_file.parent.mkdir(parents=True)
    journal_file.write_bytes(b"\n".join(lines) + b"\n")
    calls: list[int] = []
    store = MemoryStore()
    journal = store.journal("j")
    real = type(journal).append_raw

    async def counted(self: object, *batch: bytes) -> None:
        calls.append(len(batch))
        await real(self, *batch)  # type: ignore[arg-type]

    monkeypatch.setattr(type(journal), "append_raw", counted)
    await import_archive(store, archive)
    assert sum(calls) == 10
    assert len(calls) > 1
    assert await store.journal("j").read_bytes() == journal_file.read_bytes()


def test_a_large_journal_goes_both_ways_in_bounded_memory(tmp_path: Path) -> None:
    import asyncio

    source = JsonlStore(tmp_path / "source")
    path = source.journal("j").path
    path.parent.mkdir(parents=True)
    line = encode_line(post(1))
    with path.open("wb") as file:
        for _ in range((32 << 20) // len(line)):  # 32 MB
            file.write(line)

    async def both() -> None:
        await export_archive(source, tmp_path / "archive")
        await import_archive(JsonlStore(tmp_path / "target"), tmp_path / "archive")

    tracemalloc.start()
    try:
        asyncio.run(both())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "target" / "journals" / "j" / "session_journal.jsonl").read_bytes() == (
        path.read_bytes()
    )
    assert peak < 16_000_000, peak
