"""A JSONL fork: a new session file, its own header then a prefix of its source's lines.

Each session file stands alone (the Rust implementation loads it by itself),
so a fork copies its source's entry lines byte for byte, read as a load reads
them (`complete_size`), and is published whole (`Temporary`). It writes no
context hint: a hint belongs to one file. docs/jsonl.md, "Forks", says more.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from sessionstore.backends.files import write_all
from sessionstore.backends.jsonl.context import first_line
from sessionstore.backends.jsonl.file import complete_size, open_session
from sessionstore.backends.jsonl.temporary import Temporary, refuse_taken
from sessionstore.backends.records import decode_stored_entry, decode_stored_meta
from sessionstore.errors import CorruptSessionError, EntryNotFoundError

__all__ = ["copy_range", "entry_end", "write_fork"]

_NO_COPY_RANGE = frozenset(
    {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}
)
"""What ``copy_file_range`` answers where it cannot copy: read and write instead."""

_CHANGED = "the file changed while read"


def write_fork(
    source_id: str,
    source: Path,
    at: str | None,
    fork_id: str,
    final: Path,
    header: bytes,
    *,
    full: bool,
    block: int,
) -> None:
    """Write the fork ``fork_id`` of the file ``source`` at ``final``, whole or
    not at all: its ``header`` line, then the lines up to the entry ``at``
    (None: every complete line). OS errors about the source name its file."""
    fd = open_session(source_id, source, os.O_RDONLY)
    try:
        with _naming(source):
            size = complete_size(source_id, source, fd, full=full)
            line = first_line(fd, size)
            decode_stored_meta(source_id, line.removesuffix(b"\r"), path=str(source), line_no=1)
            start = len(line) + 1
            end = size if at is None else entry_end(source_id, source, fd, start, size, at, block)
        refuse_taken(final, fork_id)  # before a copy that could be long
        temporary = Temporary.create(final, "fork")
        try:
            write_all(temporary.fd, header)
            if copy_range(fd, temporary.fd, start, end, block) != end - start:
                raise CorruptSessionError(source_id, _CHANGED, path=str(source))
            temporary.publish(fork_id, full=full)
        finally:
            temporary.close()
    finally:
        os.close(fd)


def entry_end(
    session_id: str, path: Path, fd: int, start: int, size: int, at: str, block: int
) -> int:
    """Where the first entry line from ``start`` (line 2) whose id is ``at``
    ends, the lines before it decoded in order.

    Raises:
        CorruptSessionError: a line before it does not decode (naming it).
        EntryNotFoundError: none has the id ``at``.
    """
    where = str(path)
    number, offset, position, rest = 2, start, start, b""
    while position < size:
        chunk = os.pread(fd, min(block, size - position), position)
        if not chunk:
            raise CorruptSessionError(session_id, _CHANGED, path=where)
        position += len(chunk)
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()  # the start of a line that ends in a later block
        for line in lines:
            entry = decode_stored_entry(
                session_id, line.removesuffix(b"\r"), path=where, line_no=number
            )
            offset += len(line) + 1
            if entry.id == at:
                return offset
            number += 1
    raise EntryNotFoundError(session_id, at)


def copy_range(source: int, target: int, start: int, end: int, block: int) -> int:
    """Copy the bytes ``start`` to ``end`` of ``source`` to ``target``'s position;
    return how many (fewer only when ``source`` ends sooner). In the kernel
    where ``copy_file_range`` is offered, else by reads and writes."""

    offset = start
    copy = getattr(os, "copy_file_range", None)  # Linux only
    if copy is not None:
        try:
            while offset < end:
                copied = copy(source, target, end - offset, offset)
                if copied == 0:
                    break  # the source ends, or this file system copies nothing
                offset += copied
        except OSError as exc:
            if exc.errno not in _NO_COPY_RANGE:
                raise
    while offset < end:
        data = os.pread(source, min(block, end - offset), offset)
        if not data:
            break
        write_all(target, data)
        offset += len(data)
    return offset - start


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OS error that names no file is about ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise
