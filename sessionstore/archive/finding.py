"""Finding an archive's files to import: only regular files of the names an
export writes, through no link leading out of the archive; the rest reported
skipped (or refused: a link leading out, a sealed file nothing opens)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessionstore.archive.report import JOURNALS, SUFFIX, ArchiveIssue, ArchiveReport, Refused, look
from sessionstore.archive.sealing import SEALED, other_form
from sessionstore.backends.jsonl.journal import JOURNAL_FILE
from sessionstore.effects import EFFECTS_FILE

__all__ = ["find_files", "find_journals", "plain"]


def plain(paths: list[Path], report: ArchiveReport) -> list[Path]:
    """The plain files of ``paths``; the sealed ones refused, as nothing opens them."""
    for path in paths:
        if path.name.endswith(SEALED):
            reason = "encrypted (export --encrypted): give the master key that sealed it (keys=)"
            report.refused.append(ArchiveIssue(str(path), None, reason))
    return [path for path in paths if not path.name.endswith(SEALED)]


def _entries(directory: Path) -> list[Path]:
    """What a directory of the archive holds, sorted; none when it is missing."""
    try:
        return sorted(directory / name for name in os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []


def find_files(
    root: Path, part: str, what: str, report: ArchiveReport, *, sealed: bool = False
) -> list[Path]:
    """The ``*.jsonl`` files (and with ``sealed`` ``*.sealed``) of a directory of
    the archive to import as ``what`` files; the rest reported skipped (or
    refused: a link leading out)."""
    directory = root / part
    if _looked(root, directory, report) is None:
        return []
    files = []
    for path in _entries(directory):
        if path.name.startswith("."):
            _skip(report, path, "a dot-named file (an unfinished export's temporary?)")
            continue
        if not path.name.endswith(SUFFIX) and not (sealed and path.name.endswith(SEALED)):
            _skip(report, path, f"not named *{SUFFIX}" + (f" or *{SEALED}" if sealed else ""))
            continue
        if (found := _looked(root, path, report)) is None:
            continue
        if found[0] is not None and stat.S_ISREG(found[0]):
            files.append(path)
        else:
            _skip(report, path, f"{found[1]}, not a {what} file")
    return files


def find_journals(root: Path, report: ArchiveReport) -> list[Path]:
    """The journal files to import; what stands in the way of one is reported."""
    directory = root / JOURNALS
    if _looked(root, directory, report) is None:
        return []
    files = []
    for path in _entries(directory):
        if (found := _looked(root, path, report)) is None:
            continue
        if found[0] is None or not stat.S_ISDIR(found[0]):
            _skip(report, path, f"{found[1]}, not a journal's directory")
            continue
        for name in (JOURNAL_FILE, EFFECTS_FILE):  # its lines, its effects: plain or sealed
            for file in (path / name, other_form(path / name)):
                if (found := _looked(root, file, report)) is None:
                    continue
                if found[0] is not None and stat.S_ISREG(found[0]):
                    files.append(file)
                elif found[1] != "missing":
                    _skip(report, file, f"{found[1]}, not a journal file")
    return files


def _looked(root: Path, path: Path, report: ArchiveReport) -> tuple[int | None, str] | None:
    """What is at ``path`` (`look`); None, reported refused, for a link leading out."""
    try:
        return look(root, path)
    except Refused as refused:
        report.refused.append(ArchiveIssue(str(path), None, refused.reason))
        return None


def _skip(report: ArchiveReport, path: Path, reason: str) -> None:
    report.skipped.append(ArchiveIssue(str(path), None, reason))
