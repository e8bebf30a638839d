"""The archive: lossless JSONL export and import over any store (SPEC section 6).

An archive is a directory::

    <archive>/sessions/<id>.jsonl                      a valid directory store
    <archive>/journals/<name>/session_journal.jsonl    a valid journal file

Lines travel byte for byte: what was imported exports back identical
(unknown fields, key order, spacing, ``\\r``, escapes), so export, import
into an empty store and export again gives identical trees, and
``sessions/`` is a directory the Rust implementation can load.

Both directions stream: memory stays flat however large the archive.

Export writes each file under a temporary name, ``fsync``s it, renames it
into place and ``fsync``s the directory, so a crash never leaves a partial
file under a final name. Exporting into an existing archive is
incremental: a session file gets only the entries it lacks, once the file
is checked to be a byte-exact prefix of the session; a file that is not is
refused and never overwritten. A journal file is replaced by the journal
as it stands (journals are cleared by design).

Import reads, never writes, its source. Each session is all or nothing.
Importing the same archive again changes nothing; a file that extends an
imported session adds only its new entries, after the shared part is
checked byte for byte. A torn last line (a crash of whoever wrote the
file) is skipped with a warning. A file that cannot be imported is refused
with its file and line and leaves the store as it was; the other files
still import, and the run ends in an `ArchiveError` listing every refusal.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from sessionstore.backends._files import FILE_MODE, fsync_directory, in_thread, write_all
from sessionstore.backends.file_journal import JOURNAL_FILE
from sessionstore.errors import (
    ArchiveError,
    InvalidRecordError,
    SessionNotFoundError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.store import SessionStore
from sessionstore.wire import decode_meta

__all__ = ["ArchiveIssue", "ArchiveReport", "Progress", "export_archive", "import_archive"]

SESSIONS = "sessions"
JOURNALS = "journals"
SUFFIX = ".jsonl"
_CHUNK = 1 << 20

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each file (sessions, then journals)."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class ArchiveIssue:
    """A file refused (or a line skipped), and why.

    Attributes:
        file: the archive file.
        line: the 1-based line, when the issue is with one.
        reason: what is wrong.
    """

    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file} line {self.line}"
        return f"{where}: {self.reason}"


@dataclass
class ArchiveReport:
    """What an export or import did.

    Attributes:
        sessions: session files exported, or imported (new, extended or
            already there).
        entries: entries written by this run (exported lines, or entries
            added to the store).
        journals: journals exported or imported.
        bytes: bytes written to the archive (export) or read from it (import).
        refused: files refused, with line and reason.
        warnings: what was skipped but did not stop a file (a torn last line).
    """

    sessions: int = 0
    entries: int = 0
    journals: int = 0
    bytes: int = 0
    refused: list[ArchiveIssue] = field(default_factory=list)
    warnings: list[ArchiveIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing was refused."""
        return not self.refused


class _Refused(Exception):
    """One file cannot go through; it becomes an `ArchiveIssue`."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


async def _io(call: Callable[[], _T], what: Path) -> _T:
    return await in_thread(call, where=what, label="archive ")


def _finish(report: ArchiveReport, verb: str) -> ArchiveReport:
    if report.refused:
        listed = "\n".join(f"  {issue}" for issue in report.refused)
        raise ArchiveError(f"{verb} refused {len(report.refused)} file(s):\n{listed}", report)
    return report


# ---------------------------------------------------------------- export


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
    await _io(lambda: directory.mkdir(parents=True, exist_ok=True), directory)
    steps = []
    for session_id in ids:
        path = directory / f"{session_id}{SUFFIX}"
        steps.append((path, partial(_export_session, store, session_id, path, report)))
    for name in names:
        path = root / JOURNALS / name / JOURNAL_FILE
        steps.append((path, partial(_export_journal, store, name, path, report)))
    await _each_file(steps, report, progress)
    return _finish(report, "export")


async def _each_file(
    steps: Sequence[tuple[Path, Callable[[], Awaitable[None]]]],
    report: ArchiveReport,
    progress: Progress | None,
) -> None:
    """Run each file's step; a refused file is reported and the others go on."""
    for done, (path, step) in enumerate(steps, 1):
        try:
            await step()
        except _Refused as refused:
            report.refused.append(ArchiveIssue(str(path), refused.line, refused.reason))
        if progress is not None:
            progress(done, len(steps))


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
                while chunk := source.read(_CHUNK):
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
    existing = await _io(lambda: path.open("rb") if path.exists() else None, path)
    out: _AtomicFile | None = None
    matched = 0  # lines of the existing file found equal to the session's
    written = 0  # lines this run writes
    try:
        async for chunk in store.raw_blocks(session_id):
            if existing is not None:
                old = await _io(partial(existing.read, len(chunk)), path)
                if old == chunk:
                    matched += chunk.count(b"\n")
                    continue
                cut = _first_difference(old, chunk)
                if cut < len(old) or (old and not old.endswith(b"\n")):
                    line = matched + chunk[:cut].count(b"\n") + 1
                    raise _Refused(line, "differs from the stored session; not overwritten")
                # The file ends inside this chunk, on a line boundary: the rest is new.
                matched += old.count(b"\n")
                existing.close()
                existing = None
                out = _AtomicFile(path)
                await _io(partial(out.open, copy_of=path), path)
                chunk = chunk[len(old) :]
            elif out is None:
                out = _AtomicFile(path)
                await _io(out.open, path)
            await _io(partial(out.write, chunk), path)
            written += chunk.count(b"\n")
            report.bytes += len(chunk)
        if existing is not None and len(await _io(partial(existing.read, 1), path)):
            raise _Refused(matched + 1, "holds more lines than the stored session; not overwritten")
        if out is not None:
            await _io(out.publish, path)
            out = None
        report.entries += written - (1 if written and not matched else 0)  # not the header
        report.sessions += 1
    finally:
        if existing is not None:
            existing.close()
        if out is not None:
            await _io(out.discard, path)


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

    if await _io(write, path):
        report.bytes += len(data)
    report.journals += 1


# ---------------------------------------------------------------- import


async def import_archive(
    store: SessionStore, src: str | os.PathLike[str], *, progress: Progress | None = None
) -> ArchiveReport:
    """Import an archive into a store; the archive is only read.

    Args:
        store: any store.
        src: the archive directory (``sessions/`` and/or ``journals/``).
        progress: called as ``progress(done, total)`` after each file.

    Returns:
        The report; its ``refused`` is empty.

    Raises:
        ArchiveError: some files were refused (invalid, or conflicting with
            what the store holds); everything else was imported. Its
            ``report`` lists each refusal with file and line.
        StorageError: the archive or the store could not be read or written.
    """
    root = Path(src)

    def find() -> tuple[list[Path], list[Path]]:
        if not (root / SESSIONS).is_dir() and not (root / JOURNALS).is_dir():
            raise ArchiveError(f"{root} is not an archive: no {SESSIONS}/ or {JOURNALS}/", None)
        files = sorted(
            p
            for p in (root / SESSIONS).glob(f"*{SUFFIX}")
            if not p.name.startswith(".") and p.is_file()
        )
        journals = sorted((root / JOURNALS).glob(f"*/{JOURNAL_FILE}"))
        return files, journals

    files, journals = await _io(find, root)
    report = ArchiveReport()
    steps = [(path, partial(_import_session, store, path, report)) for path in files]
    steps += [(path, partial(_import_journal, store, path, report)) for path in journals]
    await _each_file(steps, report, progress)
    return _finish(report, "import")


class _FileLines:
    """A session file's complete lines, read in chunks, numbered from 1."""

    def __init__(self, path: Path, report: ArchiveReport) -> None:
        self.path = path
        self.report = report
        self.number = 0  # the line last given out

    async def __aiter__(self) -> AsyncGenerator[str, None]:
        file = await _io(lambda: self.path.open("rb"), self.path)
        try:
            rest = b""
            while chunk := await _io(partial(file.read, _CHUNK), self.path):
                self.report.bytes += len(chunk)
                pieces = (rest + chunk).split(b"\n")
                rest = pieces.pop()
                for piece in pieces:
                    self.number += 1
                    try:
                        text = piece.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise _Refused(self.number, f"invalid UTF-8 at byte {exc.start}") from None
                    yield text
            if rest:
                issue = ArchiveIssue(str(self.path), self.number + 1, "torn last line skipped")
                self.report.warnings.append(issue)
        finally:
            file.close()


async def _import_session(store: SessionStore, path: Path, report: ArchiveReport) -> None:
    session_id = path.name[: -len(SUFFIX)]
    source = _FileLines(path, report)
    lines = source.__aiter__()
    try:
        header = await anext(lines, None)
        if header is None:
            raise _Refused(1, "empty file or torn header: no header line")
        try:
            validate_session_id(session_id)
            meta = decode_meta(header)
        except SessionStoreError as exc:
            raise _Refused(1, str(exc)) from None
        if meta.id != session_id:
            raise _Refused(1, f"header names session {meta.id!r}, not the file's {session_id!r}")
        after = await _shared_part(store, session_id, header, lines, source)
        report.entries += await store.import_session(header, lines, after=after)
        report.sessions += 1
    except SessionStoreError as exc:
        line = source.number if isinstance(exc, InvalidRecordError) else None
        raise _Refused(line, str(exc)) from None
    finally:
        await lines.aclose()


async def _shared_part(
    store: SessionStore,
    session_id: str,
    header: str,
    lines: AsyncIterator[str],
    source: _FileLines,
) -> int | None:
    """Check the file against what the store holds of the session.

    Returns None when the store has no such session; otherwise how many
    entries it holds, once the file's lines matched them byte for byte as
    far as the file goes (``lines`` then goes on with the file's new lines).
    """
    stored = store.raw_lines(session_id)
    try:
        stored_header = await anext(stored)
    except SessionNotFoundError:
        return None
    if stored_header != header:
        raise _Refused(1, "header differs from the stored session")
    held = 0
    async for line in stored:
        held += 1
        mine = await anext(lines, None)
        if mine is None:  # the file is an older, shorter copy: nothing to add
            async for _ in stored:
                held += 1
            break
        if mine != line:
            raise _Refused(source.number, "differs from the stored session")
    return held


async def _import_journal(store: SessionStore, path: Path, report: ArchiveReport) -> None:
    name = path.parent.name
    try:
        validate_session_id(name)
    except SessionStoreError as exc:
        raise _Refused(None, f"journal name: {exc}") from None
    data = await _io(path.read_bytes, path)
    report.bytes += len(data)
    lines = _journal_lines(data)
    journal = store.journal(name)
    held = _journal_lines(await journal.read_bytes())
    if lines[: len(held)] == held:
        if len(lines) > len(held):
            await journal.append_raw(*lines[len(held) :])
    elif held[: len(lines)] != lines:
        differ = next(i for i, (a, b) in enumerate(zip(lines, held, strict=False)) if a != b)
        raise _Refused(differ + 1, "differs from the stored journal")
    report.journals += 1


def _journal_lines(data: bytes) -> list[bytes]:
    """A journal's lines; a torn last one is kept (it reads as skipped either way)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines
