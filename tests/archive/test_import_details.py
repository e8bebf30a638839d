"""Archive import, rule by rule: what each refusal and report entry says,
where an OS error is named, how journals are walked and appended."""

from __future__ import annotations

import errno
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    ArchiveError,
    InvalidRecordError,
    JsonlStore,
    MemoryStore,
    SessionMeta,
    StorageError,
    decode_meta,
    encode_line,
)
from sessionstore.archive import ArchiveIssue, ArchiveReport, import_archive, importing
from sessionstore.testing.contract import message
from sessionstore.testing.journal_contract import post


def session_bytes(session_id: str, *entry_ids: str) -> bytes:
    meta = encode_line(SessionMeta(id=session_id))
    return meta + b"".join(encode_line(message(e, "x")) for e in entry_ids)


def archive_with(root: Path, sessions: dict[str, bytes], journals: dict[str, bytes]) -> Path:
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    for name, data in sessions.items():
        (root / "sessions" / name).write_bytes(data)
    for name, data in journals.items():
        (root / "journals" / name).mkdir(parents=True, exist_ok=True)
        (root / "journals" / name / "session_journal.jsonl").write_bytes(data)
    return root


async def refused(store: object, root: Path) -> list[ArchiveIssue]:
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, root)  # type: ignore[arg-type]
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    return report.refused


# ---------------------------------------------------------------- refusals, exactly


async def test_each_refusal_says_what_and_where(tmp_path: Path) -> None:
    store = MemoryStore()
    await store.create(SessionMeta(id="held"))
    bad_header = b'{"id":5}\n'
    with pytest.raises(InvalidRecordError) as header_error:
        decode_meta(bad_header.decode().rstrip("\n"))
    root = archive_with(
        tmp_path / "archive",
        {
            "empty.jsonl": b"",
            "torn.jsonl": b'{"id":"torn"',
            "header.jsonl": bad_header,
            "held.jsonl": encode_line(SessionMeta(id="held", parent_session="other")),
            "utf8.jsonl": session_bytes("utf8") + b'{"type":"message","id":"\xff"}\n',
        },
        {".hidden": encode_line(post(1))},
    )
    issues = await refused(store, root)
    by_file = {Path(issue.file).name: (issue.line, issue.reason) for issue in issues}
    assert by_file == {
        "empty.jsonl": (1, "empty file or torn header: no header line"),
        "torn.jsonl": (1, "empty file or torn header: no header line"),
        "header.jsonl": (1, str(header_error.value)),
        "held.jsonl": (1, "header differs from the stored session"),
        "utf8.jsonl": (2, "invalid UTF-8 at byte 24"),
        "session_journal.jsonl": (
            None,
            "journal name: invalid session id '.hidden': starts with '.'",
        ),
    }


async def test_a_file_name_that_is_no_session_id_is_refused_on_line_1(tmp_path: Path) -> None:
    root = archive_with(tmp_path / "archive", {"a\x01b.jsonl": session_bytes("a\x01b")}, {})
    (issue,) = await refused(MemoryStore(), root)
    assert (issue.line, issue.reason) == (
        1,
        "invalid session id 'a\\x01b': forbidden character '\\x01' at index 1",
    )


async def test_the_error_names_the_run(tmp_path: Path) -> None:
    root = archive_with(tmp_path / "archive", {"empty.jsonl": b""}, {})
    with pytest.raises(ArchiveError) as caught:
        await import_archive(MemoryStore(), root)
    assert str(caught.value) == (
        "import refused 1 file(s):\n"
        f"  {root / 'sessions' / 'empty.jsonl'} line 1: "
        "empty file or torn header: no header line"
    )


async def test_a_store_that_fails_to_read_its_session_is_refused_without_a_line(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path / "store")
    await store.create(SessionMeta(id="s"))
    store.path("s").write_bytes(store.path("s").read_bytes() + b'{"id":"\xff"}\n')
    root = archive_with(tmp_path / "archive", {"s.jsonl": session_bytes("s", "e1")}, {})
    (issue,) = await refused(store, root)
    assert issue.line is None
    assert "invalid UTF-8" in issue.reason


# ---------------------------------------------------------------- the survey


async def test_a_sessions_directory_leading_out_is_refused_whole(tmp_path: Path) -> None:
    outside = archive_with(tmp_path / "outside", {"s.jsonl": session_bytes("s")}, {})
    root = tmp_path / "archive"
    root.mkdir()
    (root / "sessions").symlink_to(outside / "sessions")
    (issue,) = await refused(MemoryStore(), root)
    assert issue == ArchiveIssue(
        str(root / "sessions"),
        None,
        f"a symbolic link leading out of the archive (to {outside / 'sessions'}); not followed",
    )


async def test_a_refused_or_skipped_entry_stops_no_later_one(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_bytes(session_bytes("x"))
    root = archive_with(
        tmp_path / "archive",
        {"b.jsonl": session_bytes("b"), "d.jsonl": session_bytes("d")},
        {"b": encode_line(post(1)), "d": encode_line(post(2))},
    )
    (root / "sessions" / "a.jsonl").symlink_to(outside / "x.jsonl")  # refused, sorted first
    (root / "sessions" / "c.jsonl").mkdir()  # skipped, between
    (root / "journals" / "a").symlink_to(outside)  # refused, sorted first
    (root / "journals" / "aa").mkdir()
    (root / "journals" / "aa" / "session_journal.jsonl").symlink_to(outside / "x.jsonl")
    (root / "journals" / "c").write_bytes(b"")  # skipped, between
    (root / "journals" / "e").mkdir()  # a journal's directory without its file: nothing
    store = MemoryStore()
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, root)
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    assert [Path(i.file).relative_to(root).as_posix() for i in report.refused] == [
        "sessions/a.jsonl",
        "journals/a",
        "journals/aa/session_journal.jsonl",
    ]
    assert [Path(i.file).name for i in report.skipped] == ["c.jsonl", "c"]
    assert sorted(meta.id for meta in await store.list()) == ["b", "d"]
    assert await store.journals() == ["b", "d"]
    assert report.journals == 2


# ---------------------------------------------------------------- OS errors name the file


def no_name(*_: object, **__: object) -> object:
    raise OSError(errno.EIO, os.strerror(errno.EIO))  # as a read error: no file name


async def test_an_os_error_surveying_names_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = archive_with(tmp_path / "archive", {}, {})
    monkeypatch.setattr(importing, "_find_sessions", no_name)
    with pytest.raises(StorageError) as caught:
        await import_archive(MemoryStore(), root)
    assert str(caught.value) == f"archive {root}: Input/output error"


@pytest.mark.parametrize("where", ["open", "read"])
@pytest.mark.parametrize("kind", ["session", "journal"])
async def test_an_os_error_reading_names_the_archive_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, kind: str
) -> None:
    root = archive_with(
        tmp_path / "archive",
        {"s.jsonl": session_bytes("s")} if kind == "session" else {},
        {"j": encode_line(post(1))} if kind == "journal" else {},
    )
    path = (
        root / "sessions" / "s.jsonl"
        if kind == "session"
        else root / "journals" / "j" / "session_journal.jsonl"
    )
    if kind == "session":  # read as the archive's sessions/ opened as a store reads it
        real_open, real_pread = os.open, os.pread

        def open_failing(name: object, *args: Any, **kwargs: Any) -> int:
            if os.fspath(name) == str(path) and where == "open":  # type: ignore[call-overload]
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_open(name, *args, **kwargs)  # type: ignore[arg-type]

        def pread_failing(fd: int, size: int, offset: int) -> bytes:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path) and where == "read":
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_pread(fd, size, offset)

        monkeypatch.setattr(os, "open", open_failing)
        monkeypatch.setattr(os, "pread", pread_failing)
    elif where == "open":
        monkeypatch.setattr(importing, "open_inside", no_name)
    else:
        real_read = os.read

        def failing(fd: int, size: int) -> bytes:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_read(fd, size)

        monkeypatch.setattr(os, "read", failing)
    if kind == "session":  # refused, and the other files go on
        (issue,) = await refused(MemoryStore(), root)
        reason = f"session 's': {path}: Input/output error"
        assert (issue.file, issue.reason) == (str(path), reason)
    else:
        with pytest.raises(StorageError) as caught:
            await import_archive(MemoryStore(), root)
        assert str(caught.value) == f"archive {path}: Input/output error"


# ---------------------------------------------------------------- streaming


def test_a_session_file_is_read_in_chunks_not_whole(tmp_path: Path) -> None:
    import asyncio

    big = "z" * 2000
    entries = b"".join(encode_line(message(f"e{n}", big)) for n in range(8000))  # 16 MB
    root = archive_with(tmp_path / "archive", {"s.jsonl": session_bytes("s") + entries}, {})

    async def run() -> int:
        report = await import_archive(JsonlStore(tmp_path / "store"), root)
        return report.entries

    tracemalloc.start()
    try:
        assert asyncio.run(run()) == 8000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000, peak


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
async def test_journal_lines_survive_any_read_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(importing, "CHUNK", chunk)
    data = b"\n\nfirst\n\n" + encode_line(post(1)) + b"\nlast-torn"
    root = archive_with(tmp_path / "archive", {}, {"j": data})
    store = JsonlStore(tmp_path / "store")
    await import_archive(store, root)
    assert store.journal("j").path.read_bytes() == data + b"\n"
    assert (await import_archive(store, root)).journals == 1  # nothing more to add
    assert store.journal("j").path.read_bytes() == data + b"\n"


@pytest.mark.parametrize(("batch", "calls"), [(20, [2, 2, 2, 2, 1]), (21, [3, 3, 3])])
async def test_journal_lines_are_appended_in_batches_of_batch_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, calls: list[int]
) -> None:
    monkeypatch.setattr(importing, "_BATCH", batch)
    lines = [f"line-{n:05d}".encode() for n in range(9)]  # 10 bytes each
    root = archive_with(tmp_path / "archive", {}, {"j": b"\n".join(lines) + b"\n"})
    store = MemoryStore()
    made: list[int] = []
    journal_type = type(store.journal("j"))
    real = journal_type.append_raw

    async def counted(self: object, *given: bytes) -> None:
        made.append(len(given))
        await real(self, *given)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_type, "append_raw", counted)
    await import_archive(store, root)
    assert made == calls
    assert await store.journal("j").read_bytes() == b"\n".join(lines) + b"\n"
