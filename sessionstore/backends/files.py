"""File primitives for file-based backends (and the archive): durable, private writes.

Only regular files are read or written. A session file, journal or archive
file is opened with `open_regular`: never through a symbolic link at its
name (``O_NOFOLLOW``), never blocking on a FIFO (``O_NONBLOCK``), and
refused unless ``fstat`` finds a regular file, so a FIFO named like a
session cannot hang a reader and a link to ``/dev/zero`` cannot feed one
forever. Directories are created private to their owner (`DIR_MODE`),
like the files (`FILE_MODE`): their names are session ids and agent names.

A store's own directories (a JSONL store's ``heads/``, ``titles/``,
``journals/<name>/``...) are not followed through a link either: given
``own_dirs``, `open_regular` and `make_directory` open that many of the
directories above the file one by one, each relative to the one before
(``dir_fd``) and with ``O_NOFOLLOW``, so a link planted at any of them,
even while the call runs, is refused (`LinkedDirectoryError`) and nothing
outside is read, created or written. The directories above those (the
store's own directory and its parents) may be links.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    "LinkedDirectoryError",
    "NotRegularFileError",
    "complete_length",
    "describe",
    "fsync_directory",
    "in_thread",
    "make_directory",
    "open_regular",
    "remove_file",
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


class LinkedDirectoryError(NotRegularFileError):
    """A store's own directory is a symbolic link (or no directory): not followed."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        super().__init__(path, mode)
        self.strerror = f"not a directory of the store ({self.kind})"


def _own_directory(
    directory: Path, own_dirs: int, *, create: bool, made: list[Path] | None = None
) -> int:
    """An open file descriptor of ``directory``, whose last ``own_dirs``
    components are each opened never through a link (the first by its path,
    with ``O_NOFOLLOW``; each next one relative to the one before), created
    private when missing, with ``create``.

    Raises:
        LinkedDirectoryError: one of them is a link, or no directory.
        FileNotFoundError: one is missing (without ``create``).
    """
    parts = directory.parts[len(directory.parts) - own_dirs :]
    base = Path(*directory.parts[: len(directory.parts) - own_dirs])
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd: int | None = None  # the first is opened by its path: its parents may be links
    try:
        for number, part in enumerate(parts, 1):
            path = base.joinpath(*parts[:number])
            name = str(path) if fd is None else part
            try:
                inner = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                if fd is None and make_directory(base) and made is not None:
                    made.append(base)
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened below
                    os.mkdir(name, DIR_MODE, dir_fd=fd)
                    if made is not None:
                        made.append(path)
                inner = _opened_directory(path, name, flags, fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                inner = _opened_directory(path, name, flags, fd)
            if fd is not None:
                os.close(fd)
            fd = inner
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    assert fd is not None, "own_dirs is at least 1"
    return fd


def _opened_directory(path: Path, name: str, flags: int, parent: int | None) -> int:
    """``name`` in ``parent`` opened as a directory, or what is there named.

    Raises:
        LinkedDirectoryError: it is a link or no directory.
    """
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            found = os.lstat(name, dir_fd=parent).st_mode
        except OSError:
            raise exc from None
        raise LinkedDirectoryError(path, found) from None


def open_regular(
    path: str | os.PathLike[str], flags: int, mode: int = FILE_MODE, *, own_dirs: int = 0
) -> int:
    """Open a regular file, and nothing else, without blocking or following a link.

    Args:
        own_dirs: how many of the directories above the file are the
            store's own, never followed through a link (created when
            missing, if ``flags`` holds ``O_CREAT``).

    Raises:
        NotRegularFileError: ``path`` is a symbolic link, a FIFO, a
            directory, a device or a socket (nothing was read or written).
        LinkedDirectoryError: one of the ``own_dirs`` is a link.
        OSError: as `os.open` (``FileNotFoundError`` when missing).
    """
    parent: int | None = None
    if own_dirs:
        path = Path(path)
        parent = _own_directory(path.parent, own_dirs, create=bool(flags & os.O_CREAT))
    try:
        return _open_regular(path, flags, mode, parent)
    finally:
        if parent is not None:
            os.close(parent)


def _open_regular(path: str | os.PathLike[str], flags: int, mode: int, parent: int | None) -> int:
    name = path if parent is None else Path(path).name
    try:
        fd = os.open(
            name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=parent
        )
    except OSError as exc:
        # ELOOP: a link at the name; ENXIO: a FIFO no one reads, opened to
        # write; EISDIR: a directory opened to write. Name what is there.
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EWOULDBLOCK):
            try:
                found = os.lstat(name, dir_fd=parent).st_mode
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


def make_directory(directory: Path, *, own_dirs: int = 0) -> bool:
    """Create ``directory`` and any missing parent, each private (`DIR_MODE`).

    Args:
        own_dirs: how many of its last components are the store's own:
            never followed through a link (see `open_regular`).

    Returns:
        Whether anything was created (its parent then needs an ``fsync``
        for the new name to be durable).

    Raises:
        LinkedDirectoryError: one of the ``own_dirs`` is a link.
    """
    if own_dirs:
        made: list[Path] = []
        os.close(_own_directory(directory, own_dirs, create=True, made=made))
        return bool(made)
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


def remove_file(path: Path, *, own_dirs: int = 0, directory: bool = False) -> None:
    """Unlink ``path`` (remove it, an empty ``directory``), never through a
    link at one of its ``own_dirs``.

    Raises:
        LinkedDirectoryError: one of the ``own_dirs`` is a link.
        FileNotFoundError: there is no such file.
        OSError: as `os.unlink` or `os.rmdir` (a directory not empty).
    """
    if not own_dirs:
        path.rmdir() if directory else path.unlink()
        return
    parent = _own_directory(path.parent, own_dirs, create=False)
    try:
        if directory:
            os.rmdir(path.name, dir_fd=parent)
        else:
            os.unlink(path.name, dir_fd=parent)
    finally:
        os.close(parent)


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
