"""File primitives for file-based backends (and the archive): durable, private writes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sessionstore.errors import StorageError

__all__ = ["FILE_MODE", "complete_length", "fsync_directory", "in_thread", "write_all"]

_T = TypeVar("_T")

FILE_MODE = 0o600  # conversations are private to their owner
_CHUNK = 64 * 1024


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
