"""Small append-only logs of wire records beside the sessions: head files and
the erasure log.

One record a line, appended in one ``write`` under an exclusive ``flock``
and read under the shared one; a torn last line is dropped by reads and cut
off by the next append; a write the disk could not hold whole is cut back.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable
from pathlib import Path

from sessionstore.backends.files import (
    FILE_MODE,
    complete_length,
    fsync_directory,
    make_directory,
    open_regular,
    truncate_back,
    write_all,
)

__all__ = ["append_lines", "read_lines"]

logger = logging.getLogger(__name__)


def append_lines(
    path: Path,
    data: bytes,
    *,
    full: bool,
    what: str,
    check: Callable[[bytes], None] | None = None,
) -> None:
    """Append ``data`` (whole lines) to the log ``path`` (named ``what`` in
    warnings) in one write, all or none, creating it; ``check`` is given the
    lines it holds, under the lock, and what it raises stops the append."""

    if make_directory(path.parent, own_dirs=1) and full:
        fsync_directory(path.parent.parent)
    fd = open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE, own_dirs=1)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            keep = complete_length(fd, size)
            _dropping(what, path, size - keep)
            os.ftruncate(fd, keep)
            size = keep
        if check is not None:
            check(os.pread(fd, size, 0) if size else b"")
        try:
            write_all(fd, data)
            if full:
                os.fdatasync(fd)
        except OSError as exc:  # a full disk took part of it: whole or absent
            truncate_back(fd, size, exc)
            raise
    finally:
        os.close(fd)  # releases the lock
    if full and size == 0:
        fsync_directory(path.parent)  # the new file's name


def read_lines(path: Path, *, what: str) -> list[bytes]:
    """The complete lines of the log ``path``, oldest first (none without a
    file); a torn last line is dropped with a warning naming ``what``."""
    try:
        fd = open_regular(path, os.O_RDONLY, own_dirs=1)
    except FileNotFoundError:
        return []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # no record is halfway through its write
        with open(fd, "rb", closefd=False) as file:
            data = file.read()
    finally:
        os.close(fd)
    lines = data.split(b"\n")
    torn = lines.pop()
    if torn:
        _dropping(what, path, len(torn))
    return lines


def _dropping(what: str, path: Path, count: int) -> None:
    logger.warning("%s: dropping %d bytes of a crash-truncated last line in %s", what, count, path)
