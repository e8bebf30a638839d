"""File primitives for file-based backends (and the archive): durable, private writes.

Only regular files are opened (`open_regular`): never through a link at the
name, never blocking on a FIFO, refused unless ``fstat`` finds a regular
file, so a FIFO named like a session cannot hang a reader and a link to
``/dev/zero`` cannot feed one forever. Files and directories are private to
their owner: their names are session ids and agent names. Given
``own_dirs``, the last directories above a file (a JSONL store's
``heads/``...) are opened one by one, each relative to the one before and
with ``O_NOFOLLOW``, so a link planted at one, even while the call runs, is
refused and nothing outside is read or written.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

from sessionstore.backends.workers import Workers, WorkersStopped
from sessionstore.errors import ClosedError, StorageError

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


def _split(directory: str | os.PathLike[str], own_dirs: int) -> tuple[str, list[str]]:
    """The directory above the last ``own_dirs`` of ``directory`` ("" when
    none is named) and their names."""
    text = os.fspath(directory)
    # Split as a string: Paths made for each directory of each open were a
    # good part of an append's time (only an error needs one).
    pieces = text.rsplit(os.sep, own_dirs)
    plain = not any(piece in ("", ".", "..") for piece in pieces[1:])
    if len(pieces) == own_dirs + 1 and pieces[0] and plain:
        return pieces[0], pieces[1:]
    parts = Path(text).parts  # anything less plain, as a Path reads it
    above = parts[: len(parts) - own_dirs]
    return (str(Path(*above)) if above else ""), list(parts[len(parts) - own_dirs :])


def _own_directory(
    directory: str | os.PathLike[str],
    own_dirs: int,
    *,
    create: bool,
    made: list[Path] | None = None,
) -> int:
    """``directory`` opened, its last ``own_dirs`` components never through a
    link (created private when missing, with ``create``)."""
    base, parts = _split(directory, own_dirs)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd: int | None = None  # the first is opened by its path: its parents may be links
    try:
        for number, part in enumerate(parts, 1):
            name = part if fd is not None or not base else os.path.join(base, part)
            try:
                inner = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                path = Path(base).joinpath(*parts[:number])
                if fd is None and make_directory(Path(base)) and made is not None:
                    made.append(Path(base))
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened below
                    os.mkdir(name, DIR_MODE, dir_fd=fd)
                    if made is not None:
                        made.append(path)
                inner = _opened_directory(path, name, flags, fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                path = Path(base).joinpath(*parts[:number])
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
    """``name`` in ``parent`` opened as a directory, or a `LinkedDirectoryError`."""
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
    """Open a regular file, and nothing else, without blocking or following a
    link (nor one at the ``own_dirs`` above it, created with ``O_CREAT``)."""
    parent: int | None = None
    if own_dirs:
        above = os.path.dirname(path)
        parent = _own_directory(above, own_dirs, create=bool(flags & os.O_CREAT))
    try:
        return _open_regular(path, flags, mode, parent)
    finally:
        if parent is not None:
            os.close(parent)


def _open_regular(path: str | os.PathLike[str], flags: int, mode: int, parent: int | None) -> int:
    name = path if parent is None else os.path.basename(path)
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
    """Create ``directory`` and any missing parent, each private; whether
    anything was (its parent then needs an ``fsync``)."""
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
    """Unlink ``path`` (or rmdir a ``directory``), never through a link at
    one of its ``own_dirs``."""
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
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def truncate_back(fd: int, size: int, error: BaseException) -> None:
    """After a failed write, cut the file back to its ``size`` before it.

    A full disk can take part of a write: cut, a write is whole or absent
    and a retry duplicates nothing. A failed cut is noted on ``error``.
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
    call: Callable[[], _T],
    *,
    where: Path | Callable[[], Path],
    label: str = "",
    session_id: str | None = None,
    workers: Workers | None = None,
    key: Hashable = None,
) -> _T:
    """Run blocking file work off the event loop (in ``workers``, the thread
    ``key`` picks; else ``asyncio.to_thread``); an OS error becomes a
    `StorageError` naming the file (``where``, or what it returns, when
    the OS names none)."""
    try:
        if workers is None:
            return await asyncio.to_thread(call)
        return await workers.call(call, key)
    except OSError as exc:
        path: object = exc.filename if exc.filename is not None else _named(where)
        message = f"{label}{path}: {exc.strerror or exc}"
        raise StorageError(message, session_id=session_id) from exc
    except WorkersStopped:
        message = f"the store holding {_named(where)} is closed"
        raise ClosedError(message, session_id=session_id) from None


def _named(where: Path | Callable[[], Path]) -> Path:
    return where() if callable(where) else where
