"""What the archive's two directions share: its layout, the report, refusals,
and how archive files are reached (regular files, links kept inside)."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sessionstore.backends.files import NotRegularFileError, describe, in_thread, open_regular
from sessionstore.errors import ArchiveError

if TYPE_CHECKING:
    from sessionstore.effects import EffectLines
    from sessionstore.store import SessionJournal

__all__ = [
    "CHUNK",
    "HEADS",
    "JOURNALS",
    "SESSIONS",
    "SUFFIX",
    "TITLES",
    "ArchiveIssue",
    "ArchiveReport",
    "Progress",
    "Refused",
    "each_file",
    "finish",
    "io",
    "journal_blocks",
    "look",
    "open_inside",
    "outside",
    "parent_cycles",
]

SESSIONS = "sessions"  # <archive>/sessions/<id>.jsonl
JOURNALS = "journals"  # <archive>/journals/<name>/session_journal.jsonl
HEADS = "heads"  # <archive>/heads/<name>.jsonl
TITLES = "titles"  # <archive>/titles/<id>.jsonl
SUFFIX = ".jsonl"
CHUNK = 1 << 20  # bytes per read of an archive file

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each file (sessions, journals, heads,
then, on import, titles; an export writes a session's titles in its step)."""

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
        heads: named heads exported or imported.
        titles: title changes written by this run (exported, or added to
            the store).
        bytes: bytes written to the archive (export) or read from it (import).
        refused: files refused, with line and reason.
        warnings: what was skipped but did not stop a file (a torn last line).
        skipped: what an import found in the archive and did not read, and
            why: a dot-named file (an export's temporary), a file not named
            ``*.jsonl``, a FIFO, a directory, a link to one.
        faults: what the store holds but could not give to an export of
            everything (`SessionStore.integrity`): a session file whose
            header is torn or invalid, anything but a regular file named
            like a session. Such sessions are not in the archive.
    """

    sessions: int = 0
    entries: int = 0
    journals: int = 0
    heads: int = 0
    titles: int = 0
    bytes: int = 0
    refused: list[ArchiveIssue] = field(default_factory=list)
    warnings: list[ArchiveIssue] = field(default_factory=list)
    skipped: list[ArchiveIssue] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing was refused and the store showed no fault."""
        return not self.refused and not self.faults


class Refused(Exception):
    """One file cannot go through; it becomes an `ArchiveIssue`."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


async def journal_blocks(journal: SessionJournal | EffectLines) -> AsyncIterator[bytes]:
    """A journal's bytes (or its effects'), in blocks where it streams them."""
    read_blocks = getattr(journal, "read_blocks", None)  # a backend's, or effects': streamed
    if read_blocks is None:
        yield await journal.read_bytes()
        return
    async for block in read_blocks():
        yield block


async def io(call: Callable[[], _T], what: Path) -> _T:
    """Run blocking file work on an archive file in a thread; OS errors name it."""
    return await in_thread(call, where=what, label="archive ")


def finish(report: ArchiveReport, verb: str) -> ArchiveReport:
    """The report, or the `ArchiveError` listing every refusal and fault."""
    parts = []
    if report.refused:
        listed = "".join(f"\n  {issue}" for issue in report.refused)
        parts.append(f"{verb} refused {len(report.refused)} file(s):{listed}")
    if report.faults:
        listed = "".join(f"\n  {fault}" for fault in report.faults)
        parts.append(f"{verb} could not read {len(report.faults)} stored file(s):{listed}")
    if parts:
        raise ArchiveError("\n".join(parts), report)
    return report


def parent_cycles(parents: dict[str, str]) -> dict[str, list[str]]:
    """The sessions whose ``parent_session`` links lead back to themselves, each
    with its cycle, round to itself."""
    on_cycle: dict[str, list[str]] = {}
    done: set[str] = set()
    for start in parents:
        path: list[str] = []
        at: str | None = start
        while at is not None and at not in done and at not in path:
            path.append(at)
            at = parents.get(at)
        if at is not None and at in path:  # the walk came round: a cycle from ``at``
            cycle = path[path.index(at) :]
            for position, member in enumerate(cycle):
                turn = cycle[position:] + cycle[:position]
                on_cycle[member] = [*turn, member]
        done.update(path)
    return on_cycle


def outside(root: Path, path: Path) -> str | None:
    """Where ``path`` really leads when that is out of the archive ``root``, else None."""
    top = os.path.realpath(root)
    real = os.path.realpath(path)
    if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
        return None
    return real


def look(root: Path, path: Path) -> tuple[int | None, str]:
    """What is at ``path`` in the archive: the mode of what it leads to (None:
    nothing, or a broken link) and its name; `Refused` for a link leading out."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None, "missing"
    if not stat.S_ISLNK(mode):
        return mode, describe(mode)
    real = outside(root, path)
    if real is not None:
        raise Refused(None, f"a symbolic link leading out of the archive (to {real}); not followed")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None, "a broken symbolic link"
    return mode, f"a symbolic link to {describe(mode)}"


def open_inside(root: Path, path: Path) -> int:
    """Open an archive file to read: a regular file, through no link leading out
    (else `Refused`)."""
    real = outside(root, path)
    if real is not None:
        raise Refused(None, f"a symbolic link leading out of the archive (to {real}); not followed")
    try:
        return open_regular(os.path.realpath(path), os.O_RDONLY)
    except NotRegularFileError as exc:
        raise Refused(None, f"{exc.strerror}; not read") from None


async def each_file(
    steps: Sequence[tuple[Path, Callable[[], Awaitable[None]]]],
    report: ArchiveReport,
    progress: Progress | None,
) -> None:
    """Run each file's step; a refused file is reported and the others go on."""
    for done, (path, step) in enumerate(steps, 1):
        try:
            await step()
        except Refused as refused:
            report.refused.append(ArchiveIssue(str(path), refused.line, refused.reason))
        if progress is not None:
            progress(done, len(steps))
