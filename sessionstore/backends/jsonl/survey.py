"""What a JSONL store's directory holds, and what in it is a fault
(`JsonlStore.integrity`); nothing here writes to the directory.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from sessionstore.backends.files import NotRegularFileError, open_regular
from sessionstore.backends.jsonl import heads as head_files
from sessionstore.backends.jsonl import titles as title_files
from sessionstore.backends.jsonl.erasures import ErasureLog, FileId
from sessionstore.backends.jsonl.file import (
    SUFFIX,
    batch_noted,
    followed,
    header_or_fault,
    named_file,
    torn_tail,
)
from sessionstore.backends.jsonl.journal import JOURNAL_FILE
from sessionstore.effects import EFFECTS_FILE
from sessionstore.models import SessionMeta

__all__ = ["JOURNALS", "faults", "journal_path", "journals", "sessions"]

JOURNALS = "journals"
"""``<dir>/journals/<name>/session_journal.jsonl``: the journals."""


def journal_path(directory: Path, name: str) -> Path:
    """The file of the journal ``name`` (its name already checked)."""
    return directory / JOURNALS / name / JOURNAL_FILE


def sessions(directory: Path, *, within: Path | None = None) -> tuple[list[SessionMeta], list[str]]:
    """The headers of the sessions, and a fault for each ``*.jsonl`` file that is
    none (through a link only to a file under ``within``)."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return [], []
    metas, found = [], []
    for name in names:
        if name.endswith(SUFFIX):
            header = header_or_fault(directory / name, name[: -len(SUFFIX)], within=within)
            if isinstance(header, str):
                found.append(header)
            elif header is not None:
                metas.append(header)
    return metas, found


def journals(directory: Path) -> tuple[list[str], list[str]]:
    """The journals holding lines or effects, and a fault for what is named like one."""
    try:
        listed = sorted(os.listdir(directory / JOURNALS))
    except FileNotFoundError:
        return [], []
    names, found = [], []
    for name in listed:
        journal = journal_path(directory, name)
        held = False
        for path in (journal, journal.with_name(EFFECTS_FILE)):
            try:
                mode = os.lstat(path).st_mode
            except (FileNotFoundError, NotADirectoryError):
                continue
            if stat.S_ISREG(mode):
                held = True
            else:
                found.append(f"{path}: {NotRegularFileError(path, mode).strerror}: not listed")
        if held:
            names.append(name)
    return names, found


def faults(
    directory: Path, erasures: ErasureLog, *, torn: bool = False, within: Path | None = None
) -> list[str]:
    """What in the directory is a fault; with ``torn``, also each session file
    ending in a crash's remnant (a store that repairs nothing)."""
    metas, found = sessions(directory, within=within)
    found += journals(directory)[1]
    found += head_files.faults(directory) + title_files.faults(directory)
    if torn:
        tails = (_torn(directory, meta.id, within) for meta in metas)
        found += [fault for fault in tails if fault is not None]
    return found + erasures.pending(lambda kind, name: _erased_file(directory, kind, name))


def _torn(directory: Path, session_id: str, within: Path | None) -> str | None:
    """The fault of a session file ending in what a repair would cut, or None."""
    path = directory / f"{session_id}{SUFFIX}"
    try:
        fd = open_regular(followed(path, within), os.O_RDONLY)
    except OSError:
        return None  # gone since it was listed, or no regular file (listed apart)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # no append halfway through its write
        size = os.fstat(fd).st_size
        if size == 0 or (os.pread(fd, 1, size - 1) == b"\n" and not batch_noted(path)):
            return None
        lines, cut = torn_tail(path, fd)
    finally:
        os.close(fd)
    if not cut:
        return None
    return f"{path}: {cut} bytes after line {lines} are a crash's remnant (left: read_only)"


def _erased_file(directory: Path, kind: str, name: str) -> FileId | None:
    """The file of a session or journal an erase noted (`ErasureLog.pending`);
    None when there is none, or it is locked: an erase (or a write) under way."""

    path = directory / f"{name}{SUFFIX}" if kind == "session" else journal_path(directory, name)
    found = named_file(path)
    if found is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return found  # a link, a file unreadable here: what the name shows
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return None
    finally:
        os.close(fd)
    return found
