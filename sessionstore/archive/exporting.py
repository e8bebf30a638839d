"""`export_archive`: sessions, journals and heads out of a store, into an archive.

Only regular files are read or replaced in the archive, never through a
link leading out of it; directories are made 0700, files 0600.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from sessionstore.archive import manifest
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
    journal_blocks,
    outside,
)
from sessionstore.archive.sealing import (
    SEALED,
    KeysFile,
    Sealing,
    lines_of,
    other_form,
    sealed_lines,
    stem,
)
from sessionstore.backends.files import NotRegularFileError, make_directory, open_regular, write_all
from sessionstore.backends.jsonl.fork import copy_range
from sessionstore.backends.jsonl.journal import JOURNAL_FILE
from sessionstore.backends.jsonl.temporary import Temporary
from sessionstore.effects import EFFECTS_FILE, EFFECTS_SUFFIX
from sessionstore.errors import (
    ArchiveError,
    CorruptSessionError,
    SessionNotFoundError,
    validate_session_id,
)
from sessionstore.models import HeadMove, TitleChange
from sessionstore.store import SessionStore
from sessionstore.wire import encode_line

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import DataKey

__all__ = ["LEFT_OUT", "Against", "Differs", "export_archive", "export_chosen", "record_lines"]

LEFT_OUT = "erased while exporting: left out"
"""The warning's reason for a session erased since it was chosen."""


async def export_archive(
    store: SessionStore,
    dest: str | os.PathLike[str],
    *,
    sessions: Sequence[str] | None = None,
    journals: Sequence[str] | None = None,
    heads: Sequence[str] | None = None,
    progress: Progress | None = None,
    encrypted: bool = False,
) -> ArchiveReport:
    """Export sessions, journals and named heads into an archive.

    Args:
        store: any store.
        dest: the archive directory; created when missing, extended when it
            holds an earlier export.
        sessions: the session ids to export.
        journals: the journal names to export.
        heads: the names of the heads to export, each with every position
            it had. When none of ``sessions``, ``journals`` and ``heads``
            is given, everything is exported, and the store's `integrity`
            faults (sessions it holds but cannot list) go to
            ``report.faults``; otherwise exactly what they list.
        progress: called as ``progress(done, total)`` after each file.
        encrypted: write what the store keeps sealed sealed again, with the
            data keys in ``keys.jsonl`` (`sessionstore.archive.sealing`,
            docs/encryption.md); the store must be encrypted.

    Returns:
        The report; its ``refused`` and ``faults`` are empty.

    Raises:
        ArchiveError: some files were refused (an archive file that is not a
            prefix of its session or head, or not a regular file, or a
            session the archive holds in the other form, plain or sealed),
            or the store holds what it could not export (``faults``); the
            others were exported. Its ``report`` lists them. Also when
            ``encrypted`` is given for a store that is not.
        SessionNotFoundError: a session named in ``sessions`` does not exist.
        StorageError: the archive or the store could not be written or read.
    """
    everything = sessions is None and journals is None and heads is None
    return await export_chosen(
        store,
        dest,
        sessions=sessions,
        journals=journals,
        heads=heads,
        progress=progress,
        erased_left_out=everything,
        sealing=Sealing.of_store(store) if encrypted else None,
    )


async def export_chosen(
    store: SessionStore,
    dest: str | os.PathLike[str],
    *,
    sessions: Sequence[str] | None,
    journals: Sequence[str] | None,
    heads: Sequence[str] | None,
    progress: Progress | None,
    erased_left_out: bool,
    sealing: Sealing | None = None,
) -> ArchiveReport:
    """`export_archive`; with ``erased_left_out``, a session erased since it was
    chosen is left out with a warning, not a `SessionNotFoundError`."""
    root = Path(dest)
    report = ArchiveReport()
    everything = sessions is None and journals is None and heads is None
    ids = [s.id for s in await store.list()] if everything else list(sessions or [])
    names = await store.journals() if everything else list(journals or [])
    head_names = await store.heads() if everything else list(heads or [])
    if everything:
        report.faults += await store.integrity()
    for name in (*ids, *names, *head_names):
        validate_session_id(name)
    directory = root / SESSIONS
    await io(partial(make_directory, directory), directory)
    suffix = SUFFIX if sealing is None else SEALED
    steps = []
    for session_id in ids:
        path = directory / f"{session_id}{suffix}"
        export = partial(
            _export_session, store, root, session_id, path, report, erased_left_out, sealing
        )
        steps.append((path, export))
    for name in names:
        for file, effects in ((JOURNAL_FILE, False), (EFFECTS_FILE, True)):
            path = root / JOURNALS / name / file
            if sealing is not None:
                path = other_form(path)
            export = partial(_export_journal, store, root, name, path, report, sealing, effects)
            steps.append((path, export))
    for name in head_names:
        path = root / HEADS / f"{name}{SUFFIX}"
        steps.append((path, partial(_export_head, store, root, name, path, report)))
    previous = None if sealing is None else await _manifest(root, sealing)
    if sealing is not None:
        manifest_key = await sealing.manifest_key()  # before keys.jsonl is written
        keys = KeysFile(root)
        steps.append((keys.path, partial(_export_keys, root, keys, sealing, report)))
    await each_file(steps, report, progress)
    if sealing is not None:
        touched = {path for path, _ in steps}
        touched |= {root / TITLES / path.name for path in touched if path.parent == directory}
        write = partial(_write_manifest, root, manifest_key, previous, touched, report)
        await io(write, root)
    return finish(report, "export")


async def _manifest(root: Path, sealing: Sealing) -> dict[str, manifest.Listed] | None:
    """The encrypted archive's manifest before this export (None: it has none);
    `ArchiveError` when it does not verify."""
    try:
        return await io(partial(manifest.read, root, sealing.manifest_opener()), root)
    except Refused as refused:
        issue = ArchiveIssue(str(root / manifest.MANIFEST), refused.line, refused.reason)
        raise ArchiveError(f"export refused: {issue}; nothing exported", None) from None


def _write_manifest(
    root: Path,
    key: tuple[str, bytes],
    previous: dict[str, manifest.Listed] | None,
    touched: set[Path],
    report: ArchiveReport,
) -> None:
    """Write the archive's manifest again, with what this export wrote."""
    inside = {path.relative_to(root).as_posix() for path in touched}
    refused = {Path(issue.file).relative_to(root).as_posix() for issue in report.refused}
    refused |= {TITLES + "/" + Path(name).name for name in refused if name.startswith(SESSIONS)}
    listed = manifest.updated(root, previous, inside, refused)
    _replace(root / manifest.MANIFEST, manifest.render(*key, listed))


def _one_form(root: Path, path: Path, what: str) -> None:
    """Refuse to write ``path`` when the archive holds its ``what`` in the other
    form (plain beside sealed): an import would meet both."""
    other = other_form(path)
    if os.path.lexists(other):
        form = "sealed" if other.name.endswith(SEALED) else "plain"
        raise Refused(
            None,
            f"the archive holds this {what} {form} ({other.name}): "
            "export it the same way, or into another directory",
        )


def _existing(root: Path, path: Path) -> BinaryIO | None:
    """The archive's file at ``path`` open to read (None: there is none); `Refused`
    when something else than a regular file has the name, or its directory
    leads out of the archive."""
    real = outside(root, path.parent)
    if real is not None:
        raise Refused(None, f"its directory leads out of the archive (to {real}); not written")
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        raise Refused(None, f"{exc.strerror}; not overwritten") from None
    return os.fdopen(fd, "rb")


def _replace(path: Path, data: bytes) -> None:
    """``path`` made to hold ``data``, whole: written aside (``.<name>.tmp-<hex>``,
    the name docs/archive.md gives a leftover), synced, renamed."""
    out = Temporary.create(path, "tmp", swept=False)
    try:
        write_all(out.fd, data)
        out.publish(path.name, full=True, replace=True)
    finally:
        out.close()


class Differs(Exception):
    """An archive file and the blocks it should hold part at ``line``."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class Against:
    """An archive file (None: there is none) read in step with the blocks it
    should begin with; the file stays the caller's to close."""

    def __init__(self, file: BinaryIO | None, path: Path) -> None:
        self.file = file
        self.path = path
        self.lines = 0  # the file's lines found equal so far

    async def beyond(self, block: bytes) -> bytes:
        """The part of ``block`` past the file's end, the part before checked equal
        to the file's; `Differs` when they differ, or the file ends inside a line."""
        if self.file is None:
            return block
        old = await io(partial(self.file.read, len(block)), self.path)
        if old == block:
            self.lines += block.count(b"\n")
            return b""
        cut = next(
            (i for i, (a, b) in enumerate(zip(old, block, strict=False)) if a != b), len(old)
        )
        if cut < len(old) or (old and not old.endswith(b"\n")):
            raise Differs(self.lines + block[:cut].count(b"\n") + 1)
        self.lines += old.count(b"\n")  # the file ends here, on a line boundary
        self.file = None  # read to its end: what follows is beyond it
        return block[len(old) :]

    async def longer(self) -> bool:
        """Whether the file holds more than the blocks given so far."""
        return self.file is not None and bool(await io(partial(self.file.read, 1), self.path))


async def _extend(
    root: Path,
    path: Path,
    blocks: AsyncIterator[bytes],
    what: str,
    report: ArchiveReport,
    *,
    replace: bool = False,
) -> tuple[int, int]:
    """Make the archive's file at ``path`` hold ``blocks`` (whole lines), given
    only what it lacks; the lines it held and the lines written. `Refused`
    when it is not a byte-exact prefix of them (left as it is); with
    ``replace``, it is written anew then (a journal, which can be cleared)."""
    existing = await io(partial(_existing, root, path), path)
    against = Against(existing, path)
    out: Temporary | None = None
    matched = written = 0  # bytes found in the file; lines this run writes

    async def start() -> Temporary:  # the bytes the file holds, then the rest
        nonlocal out
        out = await io(partial(Temporary.create, path, "tmp", swept=False), path)
        if existing is not None:  # closed below, also if copying fails
            await io(partial(copy_range, existing.fileno(), out.fd, 0, matched, CHUNK), path)
        report.bytes += matched if replace else 0
        return out

    seen = False  # a block, if empty: a journal's file, empty when cleared
    try:
        async for block in blocks:
            seen = True
            try:
                new = await against.beyond(block)
            except Differs as differs:
                if not replace:
                    reason = f"differs from the stored {what}; not overwritten"
                    raise Refused(differs.line, reason) from None
                new, against.file = block, None  # what follows is all new
            matched += len(block) - len(new)
            if not new:
                continue
            out = out or await start()
            await io(partial(write_all, out.fd, new), path)
            written += new.count(b"\n")
            report.bytes += len(new)
        longer = await against.longer()
        if longer and not replace:
            reason = f"holds more lines than the stored {what}; not overwritten"
            raise Refused(against.lines + 1, reason)
        if replace and (longer or (existing is None and seen)):
            out = out or await start()

        if out is not None:
            await io(partial(out.publish, path.name, full=True, replace=True), path)
        return against.lines, written
    finally:
        if existing is not None:
            existing.close()
        if out is not None:
            await io(out.close, path)


async def _export_session(
    store: SessionStore,
    root: Path,
    session_id: str,
    path: Path,
    report: ArchiveReport,
    erased_left_out: bool,
    sealing: Sealing | None,
) -> None:
    """Export one session and its titles; with ``erased_left_out``, one erased
    since it was chosen is left out with a warning, nothing of it written.

    The titles are read first and written last: an erase before the session's
    bytes are read leaves nothing in the archive, one after leaves it whole."""
    await io(partial(_one_form, root, path, "session"), path)
    try:
        key = None if sealing is None else await sealing.key("session", session_id)
        try:
            changes = await store.titles(session_id)
        except CorruptSessionError as exc:
            titles = root / TITLES / path.name
            raise Refused(None, f"{titles}: not exported: {exc}") from None
        blocks = store.raw_blocks(session_id)
        if sealing is not None and key is not None:
            blocks = sealed_lines(lines_of(blocks), sealing, key, SESSIONS, session_id)
        matched, written = await _extend(root, path, blocks, "session", report)
    except CorruptSessionError as exc:  # what the store holds does not read back
        raise Refused(exc.line, f"not exported: {exc}") from None
    except SessionNotFoundError:
        if not erased_left_out:
            raise
        report.warnings.append(ArchiveIssue(str(path), None, LEFT_OUT))
        return
    report.entries += written - (1 if written and not matched else 0)  # not the header
    report.titles += await _export_titles(root, path, changes, report, sealing, key)
    report.sessions += 1


async def _export_titles(
    root: Path,
    session_file: Path,
    changes: list[TitleChange],
    report: ArchiveReport,
    sealing: Sealing | None,
    key: DataKey | None,
) -> int:
    """Give the archive's file of the session's titles the changes it lacks (none:
    no file); how many were written. A refusal names the file."""
    path = root / TITLES / session_file.name
    lines = record_lines(changes)
    if sealing is not None and key is not None:
        lines = sealed_lines(lines_of(lines), sealing, key, TITLES, stem(session_file))
    try:
        return (await _extend(root, path, lines, "titles", report))[1]
    except Refused as refused:
        where = path if refused.line is None else f"{path} line {refused.line}"
        raise Refused(None, f"{where}: {refused.reason}") from None


async def record_lines(records: Sequence[TitleChange | HeadMove]) -> AsyncIterator[bytes]:
    """Records, a canonical line each, oldest first, in one block (none: no block)."""
    if records:
        yield b"".join(map(encode_line, records))


async def _export_head(
    store: SessionStore, root: Path, name: str, path: Path, report: ArchiveReport
) -> None:
    """Give the archive's head file the positions it lacks: a head only grows."""
    await _extend(root, path, record_lines(await store.head_history(name)), "head", report)
    report.heads += 1


async def _export_journal(
    store: SessionStore,
    root: Path,
    name: str,
    path: Path,
    report: ArchiveReport,
    sealing: Sealing | None,
    effects: bool,
) -> None:
    """Replace the archive's journal file (or its effects') with the journal as it
    stands, streamed; left as it is when they are the same bytes."""
    await io(partial(_one_form, root, path, "journal"), path)
    journal = store.journal(name)
    blocks = journal_blocks(journal.effects.lines if effects else journal)
    if effects:  # none is no file (a journal's empty file says it was cleared)
        blocks = _filled(blocks)
    if sealing is not None:
        held = name + EFFECTS_SUFFIX if effects else name  # the journal holding the lines
        key = await sealing.key("journal", held)
        # A sealed store's journal that has sealed no line has none to give.
        blocks = (
            sealed_lines(lines_of(blocks), sealing, key, JOURNALS, held)
            if key
            else record_lines([])
        )
    await _extend(root, path, blocks, "journal", report, replace=True)
    report.journals += not effects


async def _filled(blocks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The blocks that hold anything."""
    async for block in blocks:
        if block:
            yield block


async def _export_keys(root: Path, keys: KeysFile, sealing: Sealing, report: ArchiveReport) -> None:
    """Give ``keys.jsonl`` the data keys this export sealed with, each replacing
    what it held of that key (rewrapped since)."""

    def write() -> None:
        existing = _existing(root, keys.path)
        try:
            held = b"" if existing is None else existing.read()
        finally:
            if existing is not None:
                existing.close()
        new = keys.merged(held, sealing.met)
        if new == held:
            return
        _replace(keys.path, new)
        report.bytes += len(new)

    await io(write, keys.path)
