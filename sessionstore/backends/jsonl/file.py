"""One JSONL session file: opening it, its complete length, crash repair, parsing, header.

The bytes before the last newline are complete lines and never change;
what follows it is a crash's remnant, cut under the file's exclusive lock.

A process killed inside a batch's one ``write`` can leave its first lines,
so the batch's writer notes the file's length in ``<dir>/.batch/<file>``
first and removes the note after; a note still there is cut back to by the
next repair. The note is not fsynced: a power loss can still keep a part.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import time
from pathlib import Path

from sessionstore.backends.files import (
    NotRegularFileError,
    complete_length,
    open_regular,
    remove_file,
    write_all,
)
from sessionstore.backends.records import decode_stored_entries, decode_stored_meta
from sessionstore.errors import (
    CorruptSessionError,
    SessionNotFoundError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import SessionEntry, SessionMeta
from sessionstore.wire import limits

__all__ = [
    "BATCHES",
    "READ",
    "SUFFIX",
    "batch_ended",
    "batch_noted",
    "batch_started",
    "complete_size",
    "file_id",
    "followed",
    "header_or_fault",
    "id_files",
    "named_file",
    "open_locked",
    "open_session",
    "parse",
    "read_header",
    "repair",
    "stamp",
    "torn_tail",
]

logger = logging.getLogger(__name__)

EMPTY = "empty session file (missing header line)"

SUFFIX = ".jsonl"
"""What follows the session id in the name of its file."""

BATCHES = ".batch"
"""``<dir>/.batch/<file>``: the length of a file before an unfinished batch."""

READ = 1 << 20
"""Bytes per read or write when streaming a session file."""


def _note(path: Path) -> Path:
    return path.parent / BATCHES / path.name


def batch_noted(path: Path) -> bool:
    """Whether a batch's writer noted a length for ``path`` (and has not ended
    it); a link at ``.batch/`` is followed: only a look, which the note's open
    then refuses."""
    text = os.fspath(path)  # a string: a Path made each look cost more than the look
    head, name = os.path.split(text)
    return os.path.lexists(os.path.join(head, BATCHES, name))


def batch_started(path: Path, size: int) -> None:
    """Note that a batch is about to be written after ``size`` bytes of ``path``
    (under the file's exclusive lock)."""
    note = _note(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = open_regular(note, flags, own_dirs=1)  # `.batch/` made if missing, never followed
    try:
        write_all(fd, str(size).encode())
    finally:
        os.close(fd)


def batch_ended(path: Path) -> None:
    """The batch is written (or cut back): forget its note."""
    with contextlib.suppress(FileNotFoundError):
        remove_file(_note(path), own_dirs=1)


def _unfinished_batch(session_id: str, path: Path, fd: int, *, full: bool) -> None:
    """Cut back a batch whose writer died before it ended (exclusive lock held)."""
    if not batch_noted(path):  # the usual case, seen at the cost of one lstat
        return
    note = _note(path)
    try:
        noted = open_regular(note, os.O_RDONLY, own_dirs=1)
    except FileNotFoundError:
        return
    try:
        text = os.read(noted, 64).decode("ascii", "replace")
    finally:
        os.close(noted)
    size = os.fstat(fd).st_size
    if text.isdigit() and int(text) < size:
        logger.warning(
            "session %r: dropping %d bytes of a batch whose writer died in %s",
            session_id,
            size - int(text),
            path,
        )
        os.truncate(path, int(text))
        if full:
            os.fsync(fd)
    with contextlib.suppress(FileNotFoundError):
        remove_file(note, own_dirs=1)


def followed(path: Path, within: Path | None) -> Path:
    """``path``, or where the symbolic link at it leads when that is under
    ``within`` (None: no link is followed); a link leading elsewhere stays
    ``path``, which is then opened, and refused, as a link."""
    if within is None or not path.is_symlink():
        return path
    real, top = os.path.realpath(path), os.path.realpath(within)
    return Path(real) if real.startswith(top.rstrip(os.sep) + os.sep) else path


def open_session(session_id: str, path: Path, flags: int, *, within: Path | None = None) -> int:
    """Open a session's file, a regular file and nothing else (through a link
    only to a file under ``within``).

    Raises:
        SessionNotFoundError: there is no such file.
        NotRegularFileError: something else has the name (a FIFO, a link).
    """
    try:
        return open_regular(followed(path, within), flags)
    except FileNotFoundError:
        raise SessionNotFoundError(session_id) from None


def open_locked(session_id: str, path: Path, flags: int) -> int:
    """Open a session's file and take its exclusive lock, the file still
    being the session's once locked.

    An erase unlinks the file under this lock, so a writer that opened it
    before and locks it after would write into a file no name leads to: it
    finds the name gone and refuses, or (the id used again meanwhile) opens
    the new file. Writers take their lock here and nowhere else.

    Raises:
        SessionNotFoundError: there is no such file (any more).
        NotRegularFileError: something else has the name (a FIFO, a link).
    """
    while True:
        fd = open_session(session_id, path, flags)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if file_id(fd) == named_file(path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # erased while we waited: look at the name again


def file_id(fd: int) -> tuple[int, int]:
    """The device and inode of an open file."""
    status = os.fstat(fd)
    return status.st_dev, status.st_ino


def id_files(folder: Path, kind: str, unread: str) -> tuple[list[str], list[str]]:
    """The ids of the regular files ``<id>.jsonl`` in a folder beside the
    sessions (heads, titles), and a fault naming each file so named that is
    none: a name that is no id (``not a <kind>``), or not a regular file
    (``... : <unread>``). No folder: nothing."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return [], []
    ids, faults = [], []
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        path, found = folder / name, name[: -len(SUFFIX)]
        try:
            validate_session_id(found)
            mode = os.lstat(path).st_mode
        except SessionStoreError as exc:
            faults.append(f"{path}: not a {kind}: {exc}")
            continue
        except FileNotFoundError:
            continue
        if stat.S_ISREG(mode):
            ids.append(found)
        else:
            faults.append(f"{path}: {NotRegularFileError(path, mode).strerror}: {unread}")
    return ids, faults


def named_file(path: Path) -> tuple[int, int] | None:
    """The device and inode ``path`` names now (not following a link), or None."""
    try:
        status = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return status.st_dev, status.st_ino


def repair(session_id: str, path: Path, fd: int, *, full: bool) -> int:
    """Cut a crash-torn tail; the caller holds the exclusive lock.

    Returns:
        The file's size after the repair: the length of its complete lines.

    Raises:
        CorruptSessionError: the file holds no complete line, not even its
            header (left empty).
    """
    _unfinished_batch(session_id, path, fd, full=full)
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) == b"\n":
        return size
    keep = complete_length(fd, size)
    if keep < size:
        logger.warning(
            "session %r: dropping %d bytes of a crash-truncated last line in %s",
            session_id,
            size - keep,
            path,
        )
        os.truncate(path, keep)
        if full:
            os.fsync(fd)
    if keep == 0:
        raise CorruptSessionError(session_id, EMPTY, path=str(path))
    return keep


def complete_size(session_id: str, path: Path, fd: int, *, full: bool, repairs: bool = True) -> int:
    """The length of the session file's complete lines, after any repair.

    Bytes before that length never change (appends only add after it,
    repairs only cut after it), so they can be read without a lock: the
    lock taken here is released before returning. Without ``repairs`` the
    file is left as it is: the length is what a repair would keep, and what
    it would cut is logged (`torn_tail`).
    """
    try:
        # Shared: no append is halfway through its write while we look.
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        torn = size == 0 or os.pread(fd, 1, size - 1) != b"\n"
        # A note of a batch, seen under the shared lock: its writer died.
        if not (torn or batch_noted(path)):
            return size
        if not repairs:
            kept, cut = torn_tail(path, fd)
            if cut:
                logger.warning(
                    "session %r: %d bytes after line %d of %s are a crash's remnant, "
                    "skipped and left as they are",
                    session_id,
                    cut,
                    kept,
                    path,
                )
            return size - cut
        fcntl.flock(fd, fcntl.LOCK_EX)
        return repair(session_id, path, fd, full=full)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def torn_tail(path: Path, fd: int) -> tuple[int, int]:
    """What a repair of the session file would do, doing none of it: the lines
    it would keep and the bytes it would cut (an unfinished batch, a torn
    last line)."""
    size = os.fstat(fd).st_size
    end = size
    with contextlib.suppress(FileNotFoundError):
        noted = open_regular(_note(path), os.O_RDONLY, own_dirs=1)
        try:
            text = os.read(noted, 64).decode("ascii", "replace")
        finally:
            os.close(noted)
        if text.isdigit() and int(text) < size:
            end = int(text)
    if end and os.pread(fd, 1, end - 1) != b"\n":
        end = complete_length(fd, end)
    lines, offset = 0, 0
    while offset < end and (chunk := os.pread(fd, min(READ, end - offset), offset)):
        lines += chunk.count(b"\n")
        offset += len(chunk)
    return lines, size - end


def parse(session_id: str, path: Path, data: bytes) -> list[SessionEntry]:
    """The entries of a session file's complete lines, its header checked."""
    lines = data.split(b"\n")
    lines.pop()  # what follows the last newline: nothing
    if not lines:
        raise CorruptSessionError(session_id, EMPTY, path=str(path))
    where = str(path)
    decode_stored_meta(session_id, lines[0].removesuffix(b"\r"), path=where, line_no=1)
    rows = ((seq, line.removesuffix(b"\r")) for seq, line in enumerate(lines[1:], 1))
    return decode_stored_entries(session_id, rows, path=where)


def read_header(path: Path, session_id: str) -> SessionMeta:
    """The header of one session file, read from its first line alone.

    Raises:
        InvalidSessionIdError: the file's name is no session id.
        CorruptSessionError: the file is empty, or its header torn or invalid.
        OSError: the file cannot be read, or is no regular file
            (`NotRegularFileError`).
    """
    validate_session_id(session_id)
    with open(open_regular(path, os.O_RDONLY), "rb") as file:
        line = file.readline(limits.MAX_LINE + 2)  # never more than a header may hold
    if not line:
        raise CorruptSessionError(session_id, EMPTY, path=str(path))
    if len(line) > limits.MAX_LINE + 1:
        raise CorruptSessionError(
            session_id,
            f"a session header longer than the limit of {limits.MAX_LINE} bytes",
            path=str(path),
            line=1,
        )
    if not line.endswith(b"\n"):
        raise CorruptSessionError(
            session_id, "torn header line (no newline after it)", path=str(path), line=1
        )
    return decode_stored_meta(session_id, line[:-1].removesuffix(b"\r"), path=str(path), line_no=1)


def header_or_fault(
    path: Path, session_id: str, *, within: Path | None = None
) -> SessionMeta | str | None:
    """The header of a file named like a session, or why it has none,
    naming the file: what makes a store unable to list it; None when the
    file is gone since its name was read (erased meanwhile: no fault); a link
    to a file under ``within`` is read, and named, as that file."""
    try:
        return read_header(followed(path, within), session_id)
    except FileNotFoundError:
        return None
    except CorruptSessionError as exc:
        return f"{exc}: not listed"
    except SessionStoreError as exc:  # the name
        return f"{path}: not a session file: {exc}"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}: not listed"


def stamp(fd: int) -> None:
    """Set the session file's modification time to now, to the nanosecond:
    the time of the store's last write to the session, which orders
    `JsonlStore.summaries` (the kernel's own stamp can be a clock tick
    coarse, and tie sessions written one after another)."""
    now = time.time_ns()
    os.utime(fd, ns=(now, now))
