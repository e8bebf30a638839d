"""One JSONL session file: its complete length, crash repair, parsing, header.

What the JSONL store does to a single file, apart from where files live. The
bytes before the last newline are complete lines and never change (appends
only add after them, a repair only cuts after them); what follows the last
newline is the remnant of a crash, cut under the file's exclusive lock.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from pathlib import Path

from sessionstore.backends.base import decode_stored_entries, decode_stored_meta
from sessionstore.backends.files import complete_length
from sessionstore.errors import (
    CorruptSessionError,
    SessionNotFoundError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import SessionEntry, SessionMeta

__all__ = ["complete_size", "parse", "read_header", "repair"]

logger = logging.getLogger(__name__)


def repair(session_id: str, path: Path, fd: int, *, full: bool) -> None:
    """Cut a crash-torn tail; the caller holds the exclusive lock."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) == b"\n":
        return
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
        raise CorruptSessionError(
            session_id, "empty session file (missing header line)", path=str(path)
        )


def complete_size(session_id: str, path: Path, *, full: bool) -> int:
    """The length of the session file's complete lines, after any repair.

    Bytes before that length never change (appends only add after it,
    repairs only cut after it), so they can be read without a lock.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SessionNotFoundError(session_id) from None
    try:
        # Shared: no append is halfway through its write while we look.
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) != b"\n":
            fcntl.flock(fd, fcntl.LOCK_EX)
            repair(session_id, path, fd, full=full)
            size = os.fstat(fd).st_size
        return size
    finally:
        os.close(fd)


def parse(session_id: str, path: Path, data: bytes) -> list[SessionEntry]:
    """The entries of a session file's complete lines, its header checked."""
    lines = data.split(b"\n")
    lines.pop()  # what follows the last newline: nothing
    if not lines:
        raise CorruptSessionError(
            session_id, "empty session file (missing header line)", path=str(path)
        )
    where = str(path)
    decode_stored_meta(session_id, lines[0].removesuffix(b"\r"), path=where, line_no=1)
    rows = ((seq, line.removesuffix(b"\r")) for seq, line in enumerate(lines[1:], 1))
    return decode_stored_entries(session_id, rows, path=where)


def read_header(path: Path, session_id: str) -> SessionMeta | None:
    """The header of one file, or None (with a warning) when it has none."""
    try:
        validate_session_id(session_id)
        with path.open("rb") as file:
            line = file.readline()
        if not line:
            logger.warning("skipping empty session file %s", path)
            return None
        if not line.endswith(b"\n"):
            logger.warning("skipping session file with a torn header: %s", path)
            return None
        return decode_stored_meta(
            session_id, line[:-1].removesuffix(b"\r"), path=str(path), line_no=1
        )
    except OSError as exc:
        reason = exc.strerror or exc
        if exc.errno == errno.EISDIR:
            reason = "a directory"
        logger.warning("skipping unreadable session file %s: %s", path, reason)
    except SessionStoreError as exc:
        logger.warning("skipping session file with an invalid header: %s", exc)
    return None
