"""`import_archive`: an archive's sessions, journals and heads into a store.

Only regular files are read (`sessionstore.archive.finding`), opened so that
they cannot block (a FIFO) nor lead out of the archive (a link): the rest is
reported skipped or refused. The plain session files are read as the
archive's ``sessions/`` opened read-only as a `JsonlStore` reads them, and
copied with the target's ``import_session``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sessionstore.archive import manifest
from sessionstore.archive.finding import find_files, find_journals, plain
from sessionstore.archive.report import (
    CHUNK,
    HEADS,
    JOURNALS,
    SESSIONS,
    TITLES,
    ArchiveIssue,
    ArchiveReport,
    Progress,
    Refused,
    each_file,
    finish,
    io,
    journal_blocks,
    open_inside,
    parent_cycles,
)
from sessionstore.archive.sealing import SEALED, KeysFile, Sealing, lines_of, stem
from sessionstore.backends.files import NotRegularFileError
from sessionstore.backends.holding import Holding
from sessionstore.backends.jsonl import JsonlStore
from sessionstore.effects import EFFECTS_FILE, EFFECTS_SUFFIX, EffectLines
from sessionstore.errors import (
    ArchiveError,
    CorruptSessionError,
    InvalidRecordError,
    SessionNotFoundError,
    SessionStoreError,
    StorageError,
    validate_session_id,
)
from sessionstore.models import TitleChange
from sessionstore.store import SessionJournal, SessionStore

if TYPE_CHECKING:
    from sessionstore.encryption.keyring import Keyring
    from sessionstore.encryption.keys import Key
from sessionstore.wire import Record, decode_head_move, decode_meta, decode_title_change, encode

__all__ = ["import_archive"]

_R = TypeVar("_R", bound=Record)
_L = TypeVar("_L", str, bytes)


async def import_archive(
    store: SessionStore,
    src: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    keys: Key | list[Key] | None = None,
    keyring: Keyring | str | os.PathLike[str] | None = None,
) -> ArchiveReport:
    """Import an archive into a store; the archive is only read.

    Args:
        store: any store.
        src: the archive directory (``sessions/``, ``journals/``, ``heads/``,
            ``titles/``, any of them).
        progress: called as ``progress(done, total)`` after each file.
        keys: the master keys that open an encrypted archive's data keys
            (``export --encrypted``); by default, those of ``store`` when it
            is encrypted. Its sealed files are opened and imported as their
            plain twins would be.
        keyring: where a data key the archive's ``keys.jsonl`` does not
            give is looked up (a `Keyring`, or its file or URL); with
            ``keys``. By default, the store's when it is encrypted.

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
            find_journals(root, report),
            find_files(root, HEADS, "head", report),
            find_files(root, TITLES, "titles", report, sealed=True),
        )

    files, journals, heads, titles = await io(find, root)
    sealing = await _sealing(store, root, (*files, *journals, *titles), keys, keyring, report)
    # Read as a store, changing nothing, following a link only within the archive.
    archive = JsonlStore(root / SESSIONS, read_only=True, links_within=root)
    try:
        opener = None if sealing is None else sealing.manifest_opener()
        whole = partial(manifest.check, root, opener)
        issues = await io(whole, root)
        report.refused += issues
        if issues and sealing is not None:  # truncated, or added to: nothing imported
            return finish(report, "import")
        refused = {issue.file for issue in issues}  # without keys: its heads
        heads = [path for path in heads if str(path) not in refused]
        if sealing is None:  # sealed files, and nothing to open them: each refused
            files, journals, titles = (plain(paths, report) for paths in (files, journals, titles))
        files = await _without_cycles(store, root, files, report, sealing)
        sealed = partial(_steps, store, root, report, sealing)
        # Titles after the sessions, and heads: they name sessions that must exist.
        sessions = partial(_import_session, archive=archive)
        steps = [*sealed(files, sessions), *sealed(journals, _import_journal)]
        steps += [(path, partial(_import_head, store, root, path, report)) for path in heads]
        steps += sealed(titles, _import_titles)
        await each_file(steps, report, progress)
    finally:
        await archive.close()
        if sealing is not None:
            sealing.close()
    return finish(report, "import")


def _steps(
    store: SessionStore,
    root: Path,
    report: ArchiveReport,
    sealing: Sealing | None,
    paths: list[Path],
    step: Callable[..., Awaitable[None]],
) -> list[tuple[Path, Callable[[], Awaitable[None]]]]:
    """Each file's step of the import (session, journal or titles)."""
    return [(path, partial(step, store, root, path, report, sealing)) for path in paths]


async def _sealing(
    store: SessionStore,
    root: Path,
    paths: tuple[Path, ...],
    keys: Key | list[Key] | None,
    keyring: Keyring | str | os.PathLike[str] | None,
    report: ArchiveReport,
) -> Sealing | None:
    """What opens the archive's sealed files, with ``keys.jsonl``'s keys known;
    None when it has none, or nothing to open them."""
    if (
        not any(path.name.endswith(SEALED) for path in paths)
        and not (root / manifest.MANIFEST).exists()
    ):
        return None
    sealing = Sealing.for_import(store, keys, keyring)
    if sealing is not None:
        keys_file = KeysFile(root)
        try:
            bad = await io(partial(keys_file.read, sealing), keys_file.path)
        except Refused as refused:
            bad = [(refused.line, refused.reason)]
        report.refused += [ArchiveIssue(str(keys_file.path), n, why) for n, why in bad]
    return sealing


_HEADER_AT_MOST = 1 << 20
"""Bytes of a session file read for its header's ``parent_session``; a
longer first line is left to the import, which refuses or takes it."""


def _parent_links(
    root: Path, files: list[Path], sealing: Sealing | None
) -> dict[str, tuple[str, Path]]:
    """Each session file's ``parent_session``, by session id, where its header
    decodes and names one (what does not decode is the import's to refuse)."""
    links = {}
    for path in files:
        try:  # what cannot be read here, the import reads again and names
            fd = open_inside(root, path)
            with os.fdopen(fd, "rb") as file:
                first = file.readline(_HEADER_AT_MOST)
            header = first.rstrip(b"\n").decode("utf-8")
            opener = _opener(sealing, SESSIONS, path)
            meta = decode_meta(header if opener is None else opener(1, header).decode("utf-8"))
        except (Refused, OSError, UnicodeDecodeError, SessionStoreError):
            continue
        if meta.parent_session is not None and meta.id == stem(path):
            links[meta.id] = (meta.parent_session, path)
    return links


async def _without_cycles(
    store: SessionStore,
    root: Path,
    files: list[Path],
    report: ArchiveReport,
    sealing: Sealing | None,
) -> list[Path]:
    """The session files but those whose ``parent_session`` links (with the
    store's) form a cycle, which no fork can make: each refused, naming it."""
    links = await io(partial(_parent_links, root, files, sealing), root / SESSIONS)
    if not links:
        return files
    parents = {meta.id: meta.parent_session for meta in await store.list() if meta.parent_session}
    parents.update((session_id, parent) for session_id, (parent, _) in links.items())
    cycles = parent_cycles(parents)
    kept = []
    for path in files:
        cycle = cycles.get(stem(path))
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


def _find_sessions(root: Path, report: ArchiveReport) -> list[Path]:
    """The session files to import (``sessions/*.jsonl``, ``sessions/*.sealed``)."""
    return find_files(root, SESSIONS, "session", report, sealed=True)


def _opener(sealing: Sealing | None, part: str, path: Path) -> Callable[[int, str], bytes] | None:
    """What opens the lines of ``path`` when it is sealed (None: plain)."""
    if sealing is None or not path.name.endswith(SEALED):
        return None
    if part != JOURNALS:
        return sealing.opener(part, stem(path))
    effects = EFFECTS_SUFFIX if _is_effects(path) else ""
    return sealing.opener(part, path.parent.name + effects)


def _is_effects(path: Path) -> bool:
    """Whether a file of a journal's directory holds its effects."""
    return stem(path) == stem(Path(EFFECTS_FILE))


class _FileLines:
    """A file's lines (without newlines), read in chunks, numbered from 1, opened
    with ``opener`` when sealed; a torn last line is skipped with a warning,
    or kept with ``torn_kept`` (a journal's)."""

    def __init__(
        self,
        root: Path,
        path: Path,
        report: ArchiveReport,
        opener: Callable[[int, str], bytes] | None = None,
        *,
        torn_kept: bool = False,
    ) -> None:
        self.root = root
        self.path = path
        self.report = report
        self.opener = opener
        self.torn_kept = torn_kept
        self.number = 0  # the line last given out

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        holding = Holding(partial(io, what=self.path))
        try:  # closed below, also when the generator is: after its last read
            fd = await holding.open(partial(open_inside, self.root, self.path))
            rest = b""
            while chunk := await holding.call(partial(os.read, fd, CHUNK)):
                self.report.bytes += len(chunk)
                *pieces, rest = (rest + chunk).split(b"\n")
                for piece in pieces:
                    yield await self._line(piece)
            if rest and self.torn_kept:
                yield await self._line(rest)
            elif rest:
                issue = ArchiveIssue(str(self.path), self.number + 1, "torn last line skipped")
                self.report.warnings.append(issue)
        finally:
            holding.close()

    async def _line(self, piece: bytes) -> bytes:
        self.number += 1
        if self.opener is None:
            return piece
        try:
            text = piece.decode("ascii")
        except UnicodeDecodeError:
            raise Refused(self.number, "not a sealed line (base64)") from None
        if self.number == 1:  # the first finds the key: a keyring's call
            return await io(partial(self.opener, 1, text), self.path)
        return self.opener(self.number, text)

    async def text(self) -> AsyncGenerator[str, None]:
        """The lines, each checked to be UTF-8."""
        lines = self.__aiter__()
        opened = "opens to " if self.opener is not None else ""
        try:
            async for line in lines:
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    reason = f"{opened}invalid UTF-8 at byte {exc.start}"
                    raise Refused(self.number, reason) from None
        finally:
            await lines.aclose()


async def _held(
    stored: AsyncIterator[_L], mine: AsyncIterator[_L], source: _FileLines | _StoredLines, what: str
) -> int:
    """How many lines the store holds, once those the archive's file shares
    with them are checked equal, byte for byte; ``mine`` then goes on with
    the file's lines beyond the store's (none: the file is an older, shorter
    copy)."""
    held = 0
    async for line in stored:
        held += 1
        theirs = await anext(mine, None)
        if theirs is None:
            async for _ in stored:
                held += 1
            break
        if theirs != line:
            raise Refused(source.number, f"differs from the stored {what}")
    return held


def _valid(name: str, what: str) -> None:
    """Refuse a file named for no valid id (``what``: which)."""
    try:
        validate_session_id(name)
    except SessionStoreError as exc:
        raise Refused(None, f"{what}: {exc}") from None


def _beyond(mine: list[_R], held: list[_R], what: str) -> list[_R]:
    """The records of an archive's file beyond the store's, once those they
    share are checked equal."""
    for number, (theirs, stored) in enumerate(zip(mine, held, strict=False), 1):
        if theirs != stored:
            raise Refused(number, f"differs from the stored {what}")
    return mine[len(held) :]


async def _import_session(
    store: SessionStore,
    root: Path,
    path: Path,
    report: ArchiveReport,
    sealing: Sealing | None,
    archive: JsonlStore,
) -> None:
    """Add the archive's session to the store, or its lines beyond the store's,
    those they share checked equal: a plain file read as the archive's
    ``sessions/`` opened as a JSONL store reads it, a sealed one opened."""
    session_id = stem(path)
    try:  # before the archive's store reads it: the id names the file
        validate_session_id(session_id)
    except SessionStoreError as exc:
        raise Refused(1, str(exc)) from None
    opener = _opener(sealing, SESSIONS, path)
    source: _StoredLines | _FileLines = (
        _StoredLines(archive, path, report)
        if opener is None
        else _FileLines(root, path, report, opener)
    )
    lines = source.text()
    try:
        header = await anext(lines, None)
        if header is None:
            raise Refused(1, "empty file or torn header: no header line")
        try:
            meta = decode_meta(header)
        except SessionStoreError as exc:
            raise Refused(1, str(exc)) from None
        if meta.id != session_id:
            raise Refused(1, f"header names session {meta.id!r}, not the file's {session_id!r}")
        stored = store.raw_lines(session_id)
        try:
            stored_header: str | None = await anext(stored)
        except SessionNotFoundError:
            stored_header = None  # a new session
        if stored_header is not None and stored_header != header:
            raise Refused(1, "header differs from the stored session")
        after = None if stored_header is None else await _held(stored, lines, source, "session")
        report.entries += await store.import_session(header, lines, after=after)
        report.sessions += 1
    except SessionStoreError as exc:
        line = source.number if isinstance(exc, InvalidRecordError) else None
        raise Refused(line, str(exc)) from None
    finally:
        await lines.aclose()


def _source(
    root: Path, path: Path, report: ArchiveReport, sealing: Sealing | None, archive: JsonlStore
) -> _StoredLines | _FileLines:
    """The lines of a session file: a plain one as the archive's store reads
    it, a sealed one opened."""
    opener = _opener(sealing, SESSIONS, path)
    return (
        _StoredLines(archive, path, report)
        if opener is None
        else _FileLines(root, path, report, opener)
    )


class _StoredLines:
    """A plain session file's lines, numbered from 1, as the archive's
    ``sessions/`` opened read-only as a JSONL store reads them (UTF-8, none
    longer than the limit, through a link only within the archive, never a
    FIFO); a torn last line is skipped with a warning."""

    def __init__(self, archive: JsonlStore, path: Path, report: ArchiveReport) -> None:
        self.archive = archive
        self.path = path
        self.report = report
        self.number = 0  # the line last given out

    async def text(self) -> AsyncGenerator[str, None]:
        """The lines, without newlines."""
        read = 0
        try:
            async for block in self.archive.raw_blocks(stem(self.path)):
                read += len(block)
                *lines, _ = block.decode("utf-8").split("\n")
                for line in lines:
                    self.number += 1
                    yield line
        except CorruptSessionError as exc:
            raise Refused(exc.line, exc.reason) from None
        except StorageError as exc:
            if isinstance(exc.__cause__, NotRegularFileError):
                raise Refused(None, f"{exc.__cause__.strerror}; not read") from None
            raise
        finally:
            self.report.bytes += read
        torn = await io(partial(os.path.getsize, self.path), self.path) - read
        if torn > 0:  # left by the store, as a repair would cut it
            self.report.bytes += torn
            issue = ArchiveIssue(str(self.path), self.number + 1, "torn last line skipped")
            self.report.warnings.append(issue)


async def _import_head(store: SessionStore, root: Path, path: Path, report: ArchiveReport) -> None:
    """Add to the store's head the archive's positions beyond it, those they
    share checked equal."""
    name = stem(path)
    _valid(name, "head name")
    moves = await _canonical(_FileLines(root, path, report), decode_head_move)
    held = await store.head_history(name)
    new = _beyond(moves, held, "head")
    try:
        await store.import_head(name, new, after=len(held))
    except SessionNotFoundError as exc:
        missing = [move.session_id for move in new].index(exc.session_id)
        raise Refused(len(held) + missing + 1, str(exc)) from None
    except SessionStoreError as exc:
        raise Refused(None, str(exc)) from None
    report.heads += 1


async def _canonical(source: _FileLines, decode: Callable[[str], _R]) -> list[_R]:
    """The records of a head's or titles' file, each line in the canonical form
    export writes: the store keeps records, not lines, and a line in another
    form would not export back the same."""
    records = []
    lines = source.text()
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
    store: SessionStore, root: Path, path: Path, report: ArchiveReport, sealing: Sealing | None
) -> None:
    """Add to the session's titles the archive's changes beyond the store's,
    those they share checked equal."""
    session_id = stem(path)
    _valid(session_id, "session id")
    changes: list[TitleChange] = await _canonical(
        _FileLines(root, path, report, _opener(sealing, TITLES, path)), decode_title_change
    )
    for number, change in enumerate(changes, 1):
        if change.session_id != session_id:
            raise Refused(number, f"a title change of session {change.session_id!r}")
    try:
        new = _beyond(changes, await store.titles(session_id), "titles")
        after = len(changes) - len(new)
        if new and await store.import_titles(session_id, new, after=after) != len(new):
            raise Refused(None, "the store's titles changed meanwhile: import again")
    except SessionStoreError as exc:  # no such session (its file was refused?)
        raise Refused(None, str(exc)) from None
    report.titles += len(new)


async def _import_journal(
    store: SessionStore, root: Path, path: Path, report: ArchiveReport, sealing: Sealing | None
) -> None:
    """Add to the store's journal (or its effects) the archive's lines beyond it,
    those they share checked equal; both streamed."""
    name = path.parent.name
    _valid(name, "journal name")
    effects = _is_effects(path)
    journal = store.journal(name).effects.lines if effects else store.journal(name)
    source = _FileLines(root, path, report, _opener(sealing, JOURNALS, path), torn_kept=True)
    mine = source.__aiter__()
    held = lines_of(journal_blocks(journal))
    try:
        await _held(held, mine, source, "journal")
        await _append_lines(journal, mine)
    finally:
        await held.aclose()
        await mine.aclose()
    report.journals += not effects


_BATCH = 1 << 20
"""Bytes of journal lines appended at once: a journal is imported in
batches, each whole or absent; importing again completes an interrupted one."""


async def _append_lines(journal: SessionJournal | EffectLines, lines: AsyncIterator[bytes]) -> None:
    batch: list[bytes] = []
    size = 0
    async for line in lines:
        if size >= _BATCH:
            await journal.append_raw(*batch)
            batch, size = [], 0
        batch.append(line)
        size += len(line)
    if batch:
        await journal.append_raw(*batch)
