"""File primitives for file-based backends (and the archive): durable, private writes.

Only regular files are read or written. A session file, journal or archive
file is opened with `open_regular`: never through a symbolic link at its
name (``O_NOFOLLOW``), never blocking on a FIFO (``O_NONBLOCK``), and
refused unless ``fstat`` finds a regular file, so a FIFO named like a
session cannot hang a reader and a link to ``/dev/zero`` cannot feed one
forever. Directories are created private to their owner (`DIR_MODE`),
like the files (`FILE_MODE`): their names are session ids and agent names.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sessionstore.errors import StorageError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "NotRegularFileError",
    "complete_length",
    "describe",
    "fsync_directory",
    "in_thread",
    "make_directory",
    "open_regular",
    "truncate_back",
    "write_all",
]

_T = TypeVar("_T")

FILE_MODE = 0o600  # conversations are private to their owner
DIR_MODE = 0o700  # and so are the names of their files
_CHUNK = 64 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link, not followed"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISREG, "a regular file"),
)


def describe(mode: int) -> str:
    """What a file of this ``st_mode`` is, when not a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


class NotRegularFileError(OSError):
    """A path names something other than a regular file; the message says what."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        kind = describe(mode)
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", os.fspath(path))
        self.kind = kind


def open_regular(path: str | os.PathLike[str], flags: int, mode: int = FILE_MODE) -> int:
    """Open a regular file, and nothing else, without blocking or following a link.

    Raises:
        NotRegularFileError: ``path`` is a symbolic link, a FIFO, a
            directory, a device or a socket (nothing was read or written).
        OSError: as `os.open` (``FileNotFoundError`` when missing).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        # ELOOP: a link at the name; ENXIO: a FIFO no one reads, opened to
        # write; EISDIR: a directory opened to write. Name what is there.
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EWOULDBLOCK):
            try:
                found = os.lstat(path).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(found):
                raise NotRegularFileError(path, found) from None
        raise
    try:
        found = os.fstat(fd).st_mode
        if not stat.S_ISREG(found):
            raise NotRegularFileError(path, found)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_directory(directory: Path) -> bool:
    """Create ``directory`` and any missing parent, each private (`DIR_MODE`).

    Returns:
        Whether anything was created (its parent then needs an ``fsync``
        for the new name to be durable).
    """
    missing = []
    path = directory
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            if not path.is_dir():
                raise
    return bool(missing)


def fsync_directory(directory: Path) -> None:
    """Make the names in ``directory`` (a new file, a removal) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``: in one ``write`` unless the OS takes less."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def truncate_back(fd: int, size: int, error: BaseException) -> None:
    """After a failed write, cut the file back to the ``size`` it had before it.

    A full disk can take the first part of a write and refuse the rest; the
    bytes it took are removed, so a write is whole or absent and a retry
    duplicates nothing. Should the cut fail too, its error is noted on
    ``error``, which the caller raises.
    """
    try:
        os.ftruncate(fd, size)
    except OSError as cut:
        error.add_note(f"and cutting the file back to {size} bytes failed: {cut}")


def complete_length(fd: int, size: int) -> int:
    """The length of the file up to and including its last ``\\n``."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


async def in_thread(
    call: Callable[[], _T], *, where: Path, label: str = "", session_id: str | None = None
) -> _T:
    """Run blocking file work off the event loop; an OS error becomes a
    `StorageError` naming the file (``where`` when the OS names none)."""
    try:
        return await asyncio.to_thread(call)
    except OSError as exc:
        path = exc.filename if exc.filename is not None else where
        message = f"{label}{path}: {exc.strerror or exc}"
        raise StorageError(message, session_id=session_id) from exc
