"""What the archive's two directions share: its layout, the report, refusals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from sessionstore.backends.files import in_thread
from sessionstore.errors import ArchiveError

__all__ = [
    "CHUNK",
    "JOURNALS",
    "SESSIONS",
    "SUFFIX",
    "ArchiveIssue",
    "ArchiveReport",
    "Progress",
    "Refused",
    "each_file",
    "finish",
    "io",
]

SESSIONS = "sessions"  # <archive>/sessions/<id>.jsonl
JOURNALS = "journals"  # <archive>/journals/<name>/session_journal.jsonl
SUFFIX = ".jsonl"
CHUNK = 1 << 20  # bytes per read of an archive file

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


class Refused(Exception):
    """One file cannot go through; it becomes an `ArchiveIssue`."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


async def io(call: Callable[[], _T], what: Path) -> _T:
    """Run blocking file work on an archive file in a thread; OS errors name it."""
    return await in_thread(call, where=what, label="archive ")


def finish(report: ArchiveReport, verb: str) -> ArchiveReport:
    """The report, or the `ArchiveError` listing every refusal when there was one."""
    if report.refused:
        listed = "\n".join(f"  {issue}" for issue in report.refused)
        raise ArchiveError(f"{verb} refused {len(report.refused)} file(s):\n{listed}", report)
    return report


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
