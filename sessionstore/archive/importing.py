"""`import_archive`: an archive's sessions and journals into a store.

See `sessionstore.archive` for what an archive holds and promises.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from pathlib import Path

from sessionstore.archive.report import (
    CHUNK,
    JOURNALS,
    SESSIONS,
    SUFFIX,
    ArchiveIssue,
    ArchiveReport,
    Progress,
    Refused,
    each_file,
    finish,
    io,
)
from sessionstore.backends.jsonl.journal import JOURNAL_FILE
from sessionstore.errors import (
    ArchiveError,
    InvalidRecordError,
    SessionNotFoundError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.store import SessionStore
from sessionstore.wire import decode_meta

__all__ = ["import_archive"]


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

    files, journals = await io(find, root)
    report = ArchiveReport()
    steps = [(path, partial(_import_session, store, path, report)) for path in files]
    steps += [(path, partial(_import_journal, store, path, report)) for path in journals]
    await each_file(steps, report, progress)
    return finish(report, "import")


class _FileLines:
    """A session file's complete lines, read in chunks, numbered from 1."""

    def __init__(self, path: Path, report: ArchiveReport) -> None:
        self.path = path
        self.report = report
        self.number = 0  # the line last given out

    async def __aiter__(self) -> AsyncGenerator[str, None]:
        file = await io(lambda: self.path.open("rb"), self.path)
        try:
            rest = b""
            while chunk := await io(partial(file.read, CHUNK), self.path):
                self.report.bytes += len(chunk)
                pieces = (rest + chunk).split(b"\n")
                rest = pieces.pop()
                for piece in pieces:
                    self.number += 1
                    try:
                        text = piece.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise Refused(self.number, f"invalid UTF-8 at byte {exc.start}") from None
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
            raise Refused(1, "empty file or torn header: no header line")
        try:
            validate_session_id(session_id)
            meta = decode_meta(header)
        except SessionStoreError as exc:
            raise Refused(1, str(exc)) from None
        if meta.id != session_id:
            raise Refused(1, f"header names session {meta.id!r}, not the file's {session_id!r}")
        after = await _shared_part(store, session_id, header, lines, source)
        report.entries += await store.import_session(header, lines, after=after)
        report.sessions += 1
    except SessionStoreError as exc:
        line = source.number if isinstance(exc, InvalidRecordError) else None
        raise Refused(line, str(exc)) from None
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
        raise Refused(1, "header differs from the stored session")
    held = 0
    async for line in stored:
        held += 1
        mine = await anext(lines, None)
        if mine is None:  # the file is an older, shorter copy: nothing to add
            async for _ in stored:
                held += 1
            break
        if mine != line:
            raise Refused(source.number, "differs from the stored session")
    return held


async def _import_journal(store: SessionStore, path: Path, report: ArchiveReport) -> None:
    name = path.parent.name
    try:
        validate_session_id(name)
    except SessionStoreError as exc:
        raise Refused(None, f"journal name: {exc}") from None
    data = await io(path.read_bytes, path)
    report.bytes += len(data)
    lines = _journal_lines(data)
    journal = store.journal(name)
    held = _journal_lines(await journal.read_bytes())
    if lines[: len(held)] == held:
        if len(lines) > len(held):
            await journal.append_raw(*lines[len(held) :])
    elif held[: len(lines)] != lines:
        differ = next(i for i, (a, b) in enumerate(zip(lines, held, strict=False)) if a != b)
        raise Refused(differ + 1, "differs from the stored journal")
    report.journals += 1


def _journal_lines(data: bytes) -> list[bytes]:
    """A journal's lines; a torn last one is kept (it reads as skipped either way)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines
