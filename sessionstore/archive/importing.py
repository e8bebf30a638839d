"""`import_archive`: an archive's sessions, journals and heads into a store.

See `sessionstore.archive` for what an archive holds and promises.

Only regular files are read, each opened so that it cannot block (a FIFO)
nor lead out of the archive (a symbolic link): what is not read is named in
the report, as skipped, or as refused when it is a link leading out.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from sessionstore.archive.report import (
    CHUNK,
    HEADS,
    JOURNALS,
    SESSIONS,
    SUFFIX,
    TITLES,
    ArchiveIssue,
    ArchiveReport,
    Progress,
    Refused,
    each_file,
    finish,
    io,
    look,
    open_inside,
    parent_cycles,
)
from sessionstore.backends.base import JournalBase
from sessionstore.backends.jsonl.journal import JOURNAL_FILE
from sessionstore.errors import (
    ArchiveError,
    InvalidRecordError,
    SessionNotFoundError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import TitleChange
from sessionstore.store import SessionJournal, SessionStore
from sessionstore.wire import Record, decode_head_move, decode_meta, decode_title_change, encode

__all__ = ["import_archive"]

_R = TypeVar("_R", bound=Record)


async def import_archive(
    store: SessionStore, src: str | os.PathLike[str], *, progress: Progress | None = None
) -> ArchiveReport:
    """Import an archive into a store; the archive is only read.

    Args:
        store: any store.
        src: the archive directory (``sessions/``, ``journals/``, ``heads/``,
            ``titles/``, any of them).
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
    report = ArchiveReport()

    def find() -> tuple[list[Path], list[Path], list[Path], list[Path]]:
        if not any((root / part).is_dir() for part in (SESSIONS, JOURNALS, HEADS, TITLES)):
            raise ArchiveError(
                f"{root} is not an archive: no {SESSIONS}/, {JOURNALS}/, {HEADS}/ or {TITLES}/",
                None,
            )
        return (
            _find_sessions(root, report),
            _find_journals(root, report),
            _find_files(root, HEADS, "head", report),
            _find_files(root, TITLES, "titles", report),
        )

    files, journals, heads, titles = await io(find, root)
    files = await _without_cycles(store, root, files, report)
    steps = [(path, partial(_import_session, store, root, path, report)) for path in files]
    steps += [(path, partial(_import_journal, store, root, path, report)) for path in journals]
    # After the sessions: a head's moves and titles name sessions that must exist.
    steps += [(path, partial(_import_head, store, root, path, report)) for path in heads]
    steps += [(path, partial(_import_titles, store, root, path, report)) for path in titles]
    await each_file(steps, report, progress)
    return finish(report, "import")


_HEADER_AT_MOST = 1 << 20
"""Bytes of a session file read for its header's ``parent_session``; a
longer first line is left to the import, which refuses or takes it."""


def _parent_links(root: Path, files: list[Path]) -> dict[str, tuple[str, Path]]:
    """Each session file's ``parent_session``, by session id, where its header
    decodes and names one (what does not decode is the import's to refuse)."""
    links = {}
    for path in files:
        try:  # what cannot be read here, the import reads again and names
            fd = open_inside(root, path)
            with os.fdopen(fd, "rb") as file:
                first = file.readline(_HEADER_AT_MOST)
        except (Refused, OSError):
            continue
        try:
            meta = decode_meta(first.rstrip(b"\n").decode("utf-8"))
        except (UnicodeDecodeError, SessionStoreError):
            continue
        if meta.parent_session is not None and meta.id == path.name[: -len(SUFFIX)]:
            links[meta.id] = (meta.parent_session, path)
    return links


async def _without_cycles(
    store: SessionStore, root: Path, files: list[Path], report: ArchiveReport
) -> list[Path]:
    """The session files, but for those whose ``parent_session`` links (with
    the store's) form a cycle: a session would be its own ancestor, which
    no fork can make. Each of those is refused, naming the cycle."""
    links = await io(partial(_parent_links, root, files), root / SESSIONS)
    if not links:
        return files
    parents = {meta.id: meta.parent_session for meta in await store.list() if meta.parent_session}
    parents.update((session_id, parent) for session_id, (parent, _) in links.items())
    cycles = parent_cycles(parents)
    kept = []
    for path in files:
        cycle = cycles.get(path.name[: -len(SUFFIX)])
        if cycle is None:
            kept.append(path)
            continue
        if len(cycle) == 2:
            reason = "its header names the session itself as its parent_session"
        else:
            where = [
                f"{member} ({links[member][1]})" if member in links else f"{member} (in the store)"
                for member in cycle[1:-1]
            ]
            reason = "its header's parent_session starts a cycle: " + " -> ".join(
                [cycle[0], *where, cycle[0]]
            )
        issue = f"{reason}; a session cannot be its own ancestor: not imported"
        report.refused.append(ArchiveIssue(str(path), 1, issue))
    return kept


def _entries(directory: Path) -> list[Path]:
    """What a directory of the archive holds, sorted; none when it is missing."""
    try:
        return sorted(directory / name for name in os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _find_sessions(root: Path, report: ArchiveReport) -> list[Path]:
    """The session files to import (``sessions/*.jsonl``)."""
    return _find_files(root, SESSIONS, "session", report)


def _find_files(root: Path, part: str, what: str, report: ArchiveReport) -> list[Path]:
    """The ``*.jsonl`` files of a directory of the archive (``sessions/``,
    ``heads/``, ``titles/``) to import, each a ``what`` file; everything else there goes
    to the report, skipped (or refused: a link leading out)."""
    directory = root / part
    try:
        look(root, directory)
    except Refused as refused:
        report.refused.append(ArchiveIssue(str(directory), None, refused.reason))
        return []
    files = []
    for path in _entries(directory):
        if path.name.startswith("."):
            _skip(report, path, "a dot-named file (an unfinished export's temporary?)")
            continue
        if not path.name.endswith(SUFFIX):
            _skip(report, path, f"not named *{SUFFIX}")
            continue
        try:
            mode, description = look(root, path)
        except Refused as refused:
            report.refused.append(ArchiveIssue(str(path), None, refused.reason))
            continue
        if mode is not None and stat.S_ISREG(mode):
            files.append(path)
        else:
            _skip(report, path, f"{description}, not a {what} file")
    return files


def _find_journals(root: Path, report: ArchiveReport) -> list[Path]:
    """The journal files to import (``journals/<name>/session_journal.jsonl``);
    what stands in the way of one goes to the report."""
    directory = root / JOURNALS
    found = []
    for path in (directory, *_entries(directory)):
        try:
            mode, what = look(root, path)
        except Refused as refused:
            report.refused.append(ArchiveIssue(str(path), None, refused.reason))
            if path == directory:
                return []
            continue
        if path == directory:
            continue
        if mode is None or not stat.S_ISDIR(mode):
            _skip(report, path, f"{what}, not a journal's directory")
            continue
        file = path / JOURNAL_FILE
        try:
            mode, what = look(root, file)
        except Refused as refused:
            report.refused.append(ArchiveIssue(str(file), None, refused.reason))
            continue
        if mode is not None and stat.S_ISREG(mode):
            found.append(file)
        elif what != "missing":
            _skip(report, file, f"{what}, not a journal file")
    return found


def _skip(report: ArchiveReport, path: Path, reason: str) -> None:
    report.skipped.append(ArchiveIssue(str(path), None, reason))


class _FileLines:
    """A session file's complete lines, read in chunks, numbered from 1."""

    def __init__(self, root: Path, path: Path, report: ArchiveReport) -> None:
        self.root = root
        self.path = path
        self.report = report
        self.number = 0  # the line last given out

    async def __aiter__(self) -> AsyncGenerator[str, None]:
        fd = await io(partial(open_inside, self.root, self.path), self.path)
        file = os.fdopen(fd, "rb")  # closed below, also when the generator is
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


async def _import_session(
    store: SessionStore, root: Path, path: Path, report: ArchiveReport
) -> None:
    session_id = path.name[: -len(SUFFIX)]
    source = _FileLines(root, path, report)
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


async def _import_head(store: SessionStore, root: Path, path: Path, report: ArchiveReport) -> None:
    """Add to the store's head the positions the archive's file has beyond
    it, once the positions they share are checked equal."""
    name = path.name[: -len(SUFFIX)]
    try:
        validate_session_id(name)
    except SessionStoreError as exc:
        raise Refused(None, f"head name: {exc}") from None
    moves = await _canonical(_FileLines(root, path, report), decode_head_move)
    held = await store.head_history(name)
    for number, (mine, stored) in enumerate(zip(moves, held, strict=False), 1):
        if mine != stored:
            raise Refused(number, "differs from the stored head")
    new = moves[len(held) :]
    try:
        await store.import_head(name, new, after=len(held))
    except SessionNotFoundError as exc:
        missing = [move.session_id for move in new].index(exc.session_id)
        raise Refused(len(held) + missing + 1, str(exc)) from None
    except SessionStoreError as exc:
        raise Refused(None, str(exc)) from None
    report.heads += 1


async def _canonical(source: _FileLines, decode: Callable[[str], _R]) -> list[_R]:
    """The records of a head's or titles' file, each line in the form export writes.

    A store keeps these records, not their lines, and exports them in
    canonical form: a line in any other form would not export back the same.
    """
    records = []
    lines = source.__aiter__()
    try:
        async for line in lines:
            try:
                record = decode(line)
            except InvalidRecordError as exc:
                raise Refused(source.number, str(exc)) from None
            if encode(record) != line:
                reason = f"not in canonical form (export writes {encode(record)})"
                raise Refused(source.number, reason)
            records.append(record)
    finally:
        await lines.aclose()
    return records


async def _import_titles(
    store: SessionStore, root: Path, path: Path, report: ArchiveReport
) -> None:
    """Add to the session's titles the changes the archive's file has beyond
    the store's, once the changes they share are checked equal."""
    session_id = path.name[: -len(SUFFIX)]
    try:
        validate_session_id(session_id)
    except SessionStoreError as exc:
        raise Refused(None, f"session id: {exc}") from None
    changes: list[TitleChange] = await _canonical(
        _FileLines(root, path, report), decode_title_change
    )
    for number, change in enumerate(changes, 1):
        if change.session_id != session_id:
            raise Refused(number, f"a title change of session {change.session_id!r}")
    try:
        held = await store.titles(session_id)
        for number, (mine, stored) in enumerate(zip(changes, held, strict=False), 1):
            if mine != stored:
                raise Refused(number, "differs from the stored titles")
        new = changes[len(held) :]
        if new and await store.import_titles(session_id, new, after=len(held)) != len(new):
            raise Refused(None, "the store's titles changed meanwhile: import again")
    except SessionStoreError as exc:  # no such session (its file was refused?)
        raise Refused(None, str(exc)) from None
    report.titles += len(new)


async def _import_journal(
    store: SessionStore, root: Path, path: Path, report: ArchiveReport
) -> None:
    """Add to the store's journal the lines the archive's has beyond it, once
    the lines they share are checked equal; both are streamed."""
    name = path.parent.name
    try:
        validate_session_id(name)
    except SessionStoreError as exc:
        raise Refused(None, f"journal name: {exc}") from None
    journal = store.journal(name)
    fd = await io(partial(open_inside, root, path), path)
    try:
        mine = _lines(_file_blocks(fd, path, report))
        held = _lines(_journal_blocks(journal))
        try:
            number = 0
            async for line in mine:
                number += 1
                stored = await anext(held, None)
                if stored is None:  # the store's journal is a prefix: add the rest
                    await held.aclose()
                    await _append_lines(journal, line, mine)
                    break
                if stored != line:
                    raise Refused(number, "differs from the stored journal")
        finally:
            await held.aclose()
            await mine.aclose()
    finally:
        os.close(fd)
    report.journals += 1


_BATCH = 1 << 20
"""Bytes of journal lines appended at once: a journal is imported in
batches, each whole or absent; importing again completes an interrupted one."""


async def _append_lines(journal: SessionJournal, first: bytes, rest: AsyncIterator[bytes]) -> None:
    batch, size = [first], len(first)
    async for line in rest:
        if size >= _BATCH:
            await journal.append_raw(*batch)
            batch, size = [], 0
        batch.append(line)
        size += len(line)
    await journal.append_raw(*batch)


async def _file_blocks(fd: int, path: Path, report: ArchiveReport) -> AsyncIterator[bytes]:
    while block := await io(partial(os.read, fd, CHUNK), path):
        report.bytes += len(block)
        yield block


async def _journal_blocks(journal: SessionJournal) -> AsyncIterator[bytes]:
    if isinstance(journal, JournalBase):
        async for block in journal.read_blocks():
            yield block
    else:
        yield await journal.read_bytes()


async def _lines(blocks: AsyncIterable[bytes]) -> AsyncGenerator[bytes, None]:
    """A journal's lines; a torn last one is kept (it reads as skipped either way)."""
    rest = bytearray()  # a line begun in an earlier block
    async for block in blocks:
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            if rest:
                rest += block[start:end]
                yield bytes(rest)
                rest.clear()
            else:
                yield block[start:end]
            start = end + 1
        rest += block[start:]
    if rest:
        yield bytes(rest)
