"""`export_archive`: sessions and journals out of a store, into an archive.

See `sessionstore.archive` for what an archive holds and promises.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from sessionstore.archive.report import (
    CHUNK,
    JOURNALS,
    SESSIONS,
    SUFFIX,
    ArchiveReport,
    Progress,
    Refused,
    each_file,
    finish,
    io,
)
from sessionstore.backends.files import FILE_MODE, fsync_directory, write_all
from sessionstore.backends.jsonl.journal import JOURNAL_FILE
from sessionstore.errors import validate_session_id
from sessionstore.store import SessionStore

__all__ = ["export_archive"]


async def export_archive(
    store: SessionStore,
    dest: str | os.PathLike[str],
    *,
    sessions: Sequence[str] | None = None,
    journals: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> ArchiveReport:
    """Export sessions and journals into an archive.

    Args:
        store: any store.
        dest: the archive directory; created when missing, extended when it
            holds an earlier export.
        sessions: the session ids to export.
        journals: the journal names to export. When neither ``sessions``
            nor ``journals`` is given, everything is exported; otherwise
            exactly what they list.
        progress: called as ``progress(done, total)`` after each file.

    Returns:
        The report; its ``refused`` is empty.

    Raises:
        ArchiveError: some files were refused (an archive file that is not a
            prefix of its session); the others were exported. Its ``report``
            lists them.
        SessionNotFoundError: a session named in ``sessions`` does not exist.
        StorageError: the archive or the store could not be written or read.
    """
    root = Path(dest)
    report = ArchiveReport()
    everything = sessions is None and journals is None
    ids = [s.id for s in await store.list()] if everything else list(sessions or [])
    names = await store.journals() if everything else list(journals or [])
    for name in (*ids, *names):
        validate_session_id(name)
    directory = root / SESSIONS
    await io(lambda: directory.mkdir(parents=True, exist_ok=True), directory)
    steps = []
    for session_id in ids:
        path = directory / f"{session_id}{SUFFIX}"
        steps.append((path, partial(_export_session, store, session_id, path, report)))
    for name in names:
        path = root / JOURNALS / name / JOURNAL_FILE
        steps.append((path, partial(_export_journal, store, name, path, report)))
    await each_file(steps, report, progress)
    return finish(report, "export")


class _AtomicFile:
    """A file written aside, then renamed into place once synced."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.temporary = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex}")
        self.fd = -1

    def open(self, copy_of: Path | None = None) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        self.fd = os.open(self.temporary, flags, FILE_MODE)
        if copy_of is not None:
            with copy_of.open("rb") as source:
                while chunk := source.read(CHUNK):
                    self.write(chunk)

    def write(self, data: bytes) -> None:
        write_all(self.fd, data)

    def publish(self) -> None:
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        os.replace(self.temporary, self.final)
        fsync_directory(self.final.parent)

    def discard(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.temporary.unlink(missing_ok=True)


def _first_difference(old: bytes, new: bytes) -> int:
    """The index of the first byte where two byte strings differ."""
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return index
    return min(len(old), len(new))


async def _export_session(
    store: SessionStore, session_id: str, path: Path, report: ArchiveReport
) -> None:
    existing = await io(lambda: path.open("rb") if path.exists() else None, path)
    out: _AtomicFile | None = None
    matched = 0  # lines of the existing file found equal to the session's
    written = 0  # lines this run writes
    try:
        async for chunk in store.raw_blocks(session_id):
            if existing is not None:
                old = await io(partial(existing.read, len(chunk)), path)
                if old == chunk:
                    matched += chunk.count(b"\n")
                    continue
                cut = _first_difference(old, chunk)
                if cut < len(old) or (old and not old.endswith(b"\n")):
                    line = matched + chunk[:cut].count(b"\n") + 1
                    raise Refused(line, "differs from the stored session; not overwritten")
                # The file ends inside this chunk, on a line boundary: the rest is new.
                matched += old.count(b"\n")
                existing.close()
                existing = None
                out = _AtomicFile(path)
                await io(partial(out.open, copy_of=path), path)
                chunk = chunk[len(old) :]
            elif out is None:
                out = _AtomicFile(path)
                await io(out.open, path)
            await io(partial(out.write, chunk), path)
            written += chunk.count(b"\n")
            report.bytes += len(chunk)
        if existing is not None and len(await io(partial(existing.read, 1), path)):
            raise Refused(matched + 1, "holds more lines than the stored session; not overwritten")
        if out is not None:
            await io(out.publish, path)
            out = None
        report.entries += written - (1 if written and not matched else 0)  # not the header
        report.sessions += 1
    finally:
        if existing is not None:
            existing.close()
        if out is not None:
            await io(out.discard, path)


async def _export_journal(
    store: SessionStore, name: str, path: Path, report: ArchiveReport
) -> None:
    data = await store.journal(name).read_bytes()

    def write() -> bool:
        if path.exists() and path.read_bytes() == data:
            return False
        if not data and not path.exists():
            return False  # a cleared journal: nothing to keep
        path.parent.mkdir(parents=True, exist_ok=True)
        out = _AtomicFile(path)
        try:
            out.open()
            out.write(data)
            out.publish()
        finally:
            out.discard()
        return True

    if await io(write, path):
        report.bytes += len(data)
    report.journals += 1
