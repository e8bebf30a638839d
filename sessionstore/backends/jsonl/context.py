"""The JSONL store's `load_context`: a session file read from its end.

Lines are decoded backwards to the last compaction, then on to a message
with its ``first_kept_id``; the bytes before are only searched, undecoded,
for an earlier message with that id (the context starts at the first).
Reading backwards, a line's number is counted only for an error message.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

from sessionstore.backends.contexts import BuiltContext
from sessionstore.backends.records import decode_stored_entry, decode_stored_meta
from sessionstore.errors import CorruptSessionError
from sessionstore.models import CompactionEntry, MessageEntry, SessionEntry
from sessionstore.wire import encode_string, limits

__all__ = [
    "CHUNK",
    "EarlierKept",
    "entries_between",
    "first_kept_in",
    "last_entry_id",
    "line_number",
    "read_context",
]

CHUNK = 1 << 16
"""Bytes per read, backwards."""

_File = tuple[int, int]
"""A file's device and inode."""

EarlierKept = Callable[[int, str, int], int | None]
"""``earlier(fd, first_kept_id, end)``: the offset of the first message line
before ``end`` whose id is ``first_kept_id``, or None."""


def lines_backwards(reader: _Reader, end: int) -> Iterator[tuple[int, bytes]]:
    """The lines of a file before ``end`` (just after a newline), last first, each
    with its offset, without its newline. A line's pieces are joined once its
    start is found, so a long line costs its length, not its square; one longer
    than `MAX_LINE` is a `CorruptSessionError`, never joined."""
    fd = reader.fd
    position, rest = max(end - 1, 0), b""  # the last newline ends the last line
    while position > 0:
        size = min(CHUNK, position)
        position -= size
        chunk = os.pread(fd, size, position)
        if b"\n" not in chunk:  # inside a long line: its pieces kept, not joined yet
            pieces_of = [chunk, rest]
            held = len(chunk) + len(rest)
            while position > 0 and held <= limits.MAX_LINE:
                size = min(CHUNK, position)
                position -= size
                chunk = os.pread(fd, size, position)
                pieces_of.append(chunk)
                held += len(chunk)
                if b"\n" in chunk:
                    break
            if held > limits.MAX_LINE:
                reader.too_long(_line_start(fd, position), held)
            chunk, rest = b"".join(reversed(pieces_of[2:])) + pieces_of[0], pieces_of[1]
        pieces = (chunk + rest).split(b"\n")
        rest = pieces[0]  # the end of a line that starts in an earlier chunk
        offset = position + len(rest) + 1
        lines = []
        for piece in pieces[1:]:
            lines.append((offset, piece))
            offset += len(piece) + 1
        yield from reversed(lines)
    yield 0, rest


def _line_start(fd: int, position: int) -> int:
    """The offset where the line holding byte ``position`` starts."""
    while position > 0:
        size = min(CHUNK, position)
        chunk = os.pread(fd, size, position - size)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return position - size + found + 1
        position -= size
    return 0


def line_number(fd: int, offset: int) -> int:
    """The 1-based number of the line starting at ``offset``."""
    count, position = 0, 0
    while position < offset:
        chunk = os.pread(fd, min(CHUNK, offset - position), position)
        count += chunk.count(b"\n")
        position += len(chunk)
    return count + 1


@dataclass
class _Reader:
    """Decodes lines of one session file, naming the line on a fault."""

    session_id: str
    path: str
    fd: int

    def entry(self, offset: int, line: bytes) -> SessionEntry:
        try:
            line = line.removesuffix(b"\r")
            return decode_stored_entry(self.session_id, line, path=self.path, line_no=0)
        except CorruptSessionError as exc:
            number = line_number(self.fd, offset)
            raise CorruptSessionError(
                self.session_id, exc.reason, path=self.path, line=number
            ) from None

    def too_long(self, offset: int, held: int) -> NoReturn:
        """Raise the `CorruptSessionError` of the line at ``offset``, over ``held`` bytes."""
        raise CorruptSessionError(
            self.session_id,
            f"a session entry of more than {held} bytes, longer than the limit of "
            f"{limits.MAX_LINE}",
            path=self.path,
            line=line_number(self.fd, offset),
        )

    def header(self, line: bytes) -> None:
        if not line:
            raise CorruptSessionError(
                self.session_id, "empty session file (missing header line)", path=self.path
            )
        decode_stored_meta(self.session_id, line.removesuffix(b"\r"), path=self.path, line_no=1)


def read_context(
    session_id: str, path: str, fd: int, size: int, earlier: EarlierKept, file: _File
) -> BuiltContext[_File]:
    """`build_context` of the session file's first ``size`` bytes, read from the end.

    Args:
        file: the file's device and inode: the stamp of the context built.
        earlier: finds an earlier message with the kept id (`first_kept_in`,
            or the store's memory of its answers).

    Returns:
        The context built to ``size``, each message with its entry id, and
        the id the last compaction keeps from when no message has it (a
        message arriving with it would move the start).
    """
    reader = _Reader(session_id, path, fd)
    reader.header(first_line(fd, size))
    lines = lines_backwards(reader, size)
    after: list[SessionEntry] = []  # from the end back to the last compaction, last first
    before: list[SessionEntry] = []  # back from it to the first kept message
    for offset, line in lines:
        if offset == 0:  # the header: no compaction, every message
            break
        after.append(reader.entry(offset, line))
        if isinstance(after[-1], CompactionEntry):
            kept_id = after[-1].first_kept_id
            for offset, line in lines:
                if offset == 0:
                    break  # no message before the compaction has the id
                before.append(reader.entry(offset, line))
                if isinstance(before[-1], MessageEntry) and before[-1].id == kept_id:
                    first = earlier(fd, kept_id, offset)
                    if first is not None:  # an earlier one has it too: the context starts there
                        for offset, line in lines:
                            before.append(reader.entry(offset, line))
                            if offset == first:
                                break
                    break
            break
    last = after[0].id if after else ""
    return BuiltContext.of(file, size, [*reversed(before), *reversed(after)], last)


def last_entry_id(session_id: str, path: str, fd: int, size: int) -> str:
    """The id of the last entry in a session file's first ``size`` bytes
    (complete lines); ``""`` when it holds only its header."""
    reader = _Reader(session_id, path, fd)
    offset, line = next(lines_backwards(reader, size))
    return "" if offset == 0 else reader.entry(offset, line).id


def entries_between(
    session_id: str, path: str, fd: int, start: int, end: int
) -> list[SessionEntry]:
    """The entries of the complete lines from byte ``start`` to ``end``."""
    if start == end:
        return []
    data = os.pread(fd, end - start, start)
    if len(data) != end - start or not data.endswith(b"\n"):
        raise CorruptSessionError(session_id, "the file changed while read", path=path)
    reader = _Reader(session_id, path, fd)
    entries, offset = [], start
    for line in data[:-1].split(b"\n"):
        entries.append(reader.entry(offset, line))
        offset += len(line) + 1
    return entries


def first_line(fd: int, size: int) -> bytes:
    """The first line of a file whose first ``size`` bytes end in a newline."""
    pieces, position = [], 0
    while position < size and position <= limits.MAX_LINE:  # longer: refused as it is
        chunk = os.pread(fd, min(CHUNK, size - position), position)
        end = chunk.find(b"\n")
        if end >= 0:
            pieces.append(chunk[:end])
            break
        pieces.append(chunk)
        position += len(chunk)
    return b"".join(pieces)


def first_kept_in(fd: int, kept: str, end: int, start: int = 0) -> int | None:
    """The offset of the first message line before ``end`` whose id is ``kept``
    (from ``start``, where a line begins, when those before are known not to).

    A line can hold that id only if it holds the id's canonical spelling,
    or an escape that spells it otherwise (``\\u``, or ``\\/`` for a slash;
    every other character has one spelling besides ``\\u``). Those lines
    alone are decoded; the search over the rest runs at memory speed.
    """
    if end == 0:
        return None
    needles = [encode_string(kept).encode(), b"\\u"]
    if "/" in kept:
        needles.append(b"\\/")
    with mmap.mmap(fd, end, access=mmap.ACCESS_READ) as data:
        position = max(start, data.find(b"\n") + 1)  # after the header
        hits = {needle: data.find(needle, position, end) for needle in needles}
        while True:
            found = [hit for hit in hits.values() if hit >= 0]
            if not found:
                return None
            start = data.rfind(b"\n", 0, min(found)) + 1
            stop = data.find(b"\n", start, end)
            try:
                entry = decode_stored_entry("", data[start:stop], path=None, line_no=0)
            except CorruptSessionError:
                entry = None  # reported, with its line, when the file is loaded
            if isinstance(entry, MessageEntry) and entry.id == kept:
                return start
            position = stop + 1
            for needle, hit in hits.items():
                if 0 <= hit < position:
                    hits[needle] = data.find(needle, position, end)
