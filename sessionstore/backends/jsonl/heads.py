"""Named heads of the JSONL store: ``<dir>/heads/<name>.jsonl``, one move per line.

A head's file holds every `HeadMove`, oldest first, each a line in the
wire form (`sessionstore.wire.encode`). A move is appended in one
``write`` (``O_APPEND``) under an exclusive ``flock`` on the file, so moves
from many tasks and processes are each kept, one after another; a read
holds the shared lock, so it never sees a line still being written.

Crash safety is that of session files: what follows the last newline is
the remnant of a crash, dropped by reads (with a warning) and cut off
before the next move is written, so a move never fuses onto it. With
``durability="full"`` each move is ``fsync``ed (and a new file's directory
entry), so it survives a power loss; otherwise a crash of the process.

A complete line that does not decode is a `CorruptSessionError` naming the
head (as its ``session_id``), the file and the line. Only regular files are
head files: anything else at a head's name is a `StorageError` when used,
and `names` reports it rather than listing it. ``heads/`` is created private
to its owner, like ``journals/``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
from pathlib import Path

from sessionstore.backends.files import (
    FILE_MODE,
    NotRegularFileError,
    complete_length,
    fsync_directory,
    make_directory,
    open_regular,
    truncate_back,
    write_all,
)
from sessionstore.backends.jsonl.file import SUFFIX
from sessionstore.errors import (
    CorruptSessionError,
    InvalidRecordError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import HeadMove
from sessionstore.wire import decode_head_move, encode

__all__ = ["HEADS", "append_move", "faults", "names", "read_moves"]

HEADS = "heads"
"""``<dir>/heads/<name>.jsonl``: the moves of the head ``name``."""

logger = logging.getLogger(__name__)


def append_move(name: str, path: Path, move: HeadMove, *, full: bool) -> None:
    """Append ``move`` to the head file ``path``, creating it (and ``heads/``)."""
    line = (encode(move) + "\n").encode()
    if make_directory(path.parent) and full:
        fsync_directory(path.parent.parent)
    fd = open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            keep = complete_length(fd, size)
            _dropping(name, path, size - keep)
            os.ftruncate(fd, keep)
            size = keep
        try:
            write_all(fd, line)
            if full:
                os.fdatasync(fd)
        except OSError as exc:  # a full disk took part of it: whole or absent
            truncate_back(fd, size, exc)
            raise
    finally:
        os.close(fd)  # releases the lock
    if full and size == 0:
        fsync_directory(path.parent)  # the new file's name


def read_moves(name: str, path: Path) -> list[HeadMove]:
    """The moves in the head file ``path``, oldest first (none without a file).

    Raises:
        CorruptSessionError: a complete line does not decode (naming it).
    """
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # no move is halfway through its write
        with open(fd, "rb", closefd=False) as file:
            data = file.read()
    finally:
        os.close(fd)
    lines = data.split(b"\n")
    torn = lines.pop()
    if torn:
        _dropping(name, path, len(torn))
    moves = []
    for number, line in enumerate(lines, 1):
        try:
            moves.append(decode_head_move(line))
        except InvalidRecordError as exc:
            raise CorruptSessionError(name, str(exc), path=str(path), line=number) from None
    return moves


def names(directory: Path) -> tuple[list[str], list[str]]:
    """The heads in the store ``directory``, and a fault for each file named
    like a head that is none (not a regular file, a name that is no id)."""
    heads = directory / HEADS
    try:
        found = sorted(os.listdir(heads))
    except FileNotFoundError:
        return [], []
    listed, faults = [], []
    for file in found:
        if not file.endswith(SUFFIX):
            continue
        path, name = heads / file, file[: -len(SUFFIX)]
        try:
            validate_session_id(name)
            mode = os.lstat(path).st_mode
        except SessionStoreError as exc:
            faults.append(f"{path}: not a head file: {exc}")
            continue
        except FileNotFoundError:
            continue
        if stat.S_ISREG(mode):
            listed.append(name)
        else:
            faults.append(f"{path}: {NotRegularFileError(path, mode).strerror}: not listed")
    return listed, faults


def faults(directory: Path) -> list[str]:
    """What is wrong with the heads: files `names` cannot list, and lines
    that do not decode, each naming its file."""
    listed, found = names(directory)
    for name in listed:
        path = directory / HEADS / f"{name}{SUFFIX}"
        try:
            read_moves(name, path)
        except CorruptSessionError as exc:
            found.append(str(exc))
        except OSError as exc:
            found.append(f"{path}: {exc.strerror or exc}")
    return found


def _dropping(name: str, path: Path, count: int) -> None:
    logger.warning(
        "head %r: dropping %d bytes of a crash-truncated last line in %s", name, count, path
    )
