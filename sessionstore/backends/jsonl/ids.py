"""An index of a JSONL session's message ids, kept beside the files (a cache).

After a new compaction `load_context` must know whether a message before the
kept one has the kept id too: ``<dir>/.ids/<id>`` answers it from 16 bytes a
message (a hash of its id, its line's offset), appended under the session
file's lock, then a mark (how far the file is covered, a digest of the bytes
before); ``.ids/.firsts/<id>`` is the column of each record's first 4 bytes
that a search scans. Checked before it is believed (device, inode, header
digest, the last mark's digest); docs/jsonl.md, "An index of ids", says more.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import struct
from pathlib import Path
from typing import BinaryIO

from sessionstore.backends.files import make_directory, open_regular, remove_file, write_all
from sessionstore.backends.jsonl.context import CHUNK, first_kept_in, first_line
from sessionstore.backends.records import decode_stored_entry
from sessionstore.errors import CorruptSessionError
from sessionstore.models import MessageEntry

__all__ = ["CATCH_UP", "FIRSTS", "IDS", "adopt", "first_kept", "forget", "note", "spooled"]

IDS = ".ids"  # <dir>/.ids/<id>: no session id starts with a dot
FIRSTS = ".firsts"  # <dir>/.ids/.firsts/<id>: the first bytes of each record
_FIRST = 4  # bytes of a record's hash in the column, searched before the records
CATCH_UP = 1 << 16
"""Most bytes of unindexed lines an append decodes to start or catch up an index."""

_MAGIC = b"sessionstore ids 1\n"
_HEADER = struct.Struct("<19sQQ8s")  # the magic, the file's device and inode, its header's digest
_RECORD = struct.Struct("<8sq")  # an id's hash and its line's offset, or a mark: seal, -1 - end
_WINDOW = 4096  # most bytes before a mark's end that its seal covers
_SPOOL_BLOCK = _RECORD.size << 16  # records read at once from a spool (1 MiB)


def note(
    directory: Path, session_id: str, fd: int, size: int, data: bytes, ids: list[tuple[str, int]]
) -> None:
    """Index the messages of ``data``, just written at ``size`` (``ids``: each
    one's id and offset in ``data``); the caller holds the file's lock."""
    path, firsts = _paths(directory, session_id)
    try:
        index = _open_for_append(path, create=size <= CATCH_UP)
    except OSError:
        return  # none, and too late to start one; or none can be written here
    try:
        header = _header(fd)
        found = _covered(index, header, size)
        start = b""
        if found is None:  # new, or not this file's: start again, if cheap
            if size > CATCH_UP:
                forget(directory, session_id)
                return
            os.ftruncate(index, 0)
            start, found = header, (0, 0)
        covered, held = found
        records = []
        if covered < size:  # lines it has not seen: decoded, if few
            if size - covered > CATCH_UP:
                return
            records += _messages(fd, covered, size)
        records.append(spooled(size, ids))
        records.append(_mark(fd, size + len(data), data))
        new = b"".join(records)
        _extend_firsts(firsts, index, held, new)
        write_all(index, start + new)
    except OSError:
        return
    finally:
        os.close(index)


def spooled(at: int, ids: list[tuple[str, int]]) -> bytes:
    """The records of messages written at ``at`` (each id with its offset from there)."""
    return b"".join(_RECORD.pack(_hash(entry_id), at + offset) for entry_id, offset in ids)


def adopt(directory: Path, session_id: str, fd: int, size: int, spool: BinaryIO) -> None:
    """Write the index of an imported session file just published, from the
    `spooled` records, under its lock; one that cannot be written is not left."""
    path, firsts = _paths(directory, session_id)
    index = column = -1
    try:
        make_directory(Path(firsts).parent, own_dirs=2)
        index = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, own_dirs=1)
        column = open_regular(firsts, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, own_dirs=2)
        write_all(index, _header(fd))
        spool.seek(0)
        while block := spool.read(_SPOOL_BLOCK):
            write_all(column, _firsts(block))
            write_all(index, block)
        mark = _mark(fd, size, b"")
        write_all(column, _firsts(mark))
        write_all(index, mark)
    except OSError:
        with contextlib.suppress(OSError):
            forget(directory, session_id)
    finally:
        for opened in (index, column):
            if opened >= 0:
                os.close(opened)


def _extend_firsts(path: str, index: int, held: int, new: bytes) -> None:
    """Append the first bytes of the ``new`` records to the column, first
    brought to the ``held`` records before them (a crash leaves it longer,
    a deletion short)."""
    try:
        column = _open_for_append(path, create=True)
    except OSError:
        return
    try:
        length = os.fstat(column).st_size
        has = length // _FIRST
        if has > held or length % _FIRST:
            has = min(has, held)
            os.ftruncate(column, has * _FIRST)
        if has < held:
            write_all(column, _firsts(os.pread(index, (held - has) * _RECORD.size, _at(has))))
        write_all(column, _firsts(new))
    except OSError:  # searches scan the records until an append catches it up
        with contextlib.suppress(OSError):
            os.ftruncate(column, 0)
    finally:
        os.close(column)


def first_kept(directory: Path, session_id: str, fd: int, kept: str, end: int) -> int | None:
    """`first_kept_in`, with the index's help where it holds."""
    path, firsts = _paths(directory, session_id)
    try:
        index = open_regular(path, os.O_RDONLY, own_dirs=1)
    except OSError:
        return first_kept_in(fd, kept, end)
    try:
        found = _look_up(index, firsts, fd, kept, end)
    except (OSError, ValueError):
        found = None
    finally:
        os.close(index)
    if found is None:
        return first_kept_in(fd, kept, end)
    offsets, covered = found
    for offset in offsets:
        if _holds(fd, offset, kept):
            return offset
    return first_kept_in(fd, kept, end, start=covered) if covered < end else None


def forget(directory: Path, session_id: str) -> None:
    """Remove the session's index (the session is erased)."""
    for path in _paths(directory, session_id):
        with contextlib.suppress(FileNotFoundError):
            remove_file(Path(path), own_dirs=_own_dirs(path))


def _paths(directory: Path, session_id: str) -> tuple[str, str]:
    """The index's records, and its column of their first bytes."""
    index = os.path.join(directory, IDS, session_id)
    return index, os.path.join(directory, IDS, FIRSTS, session_id)


def _open_for_append(path: str, *, create: bool) -> int:
    own = _own_dirs(path)
    try:
        return open_regular(path, os.O_RDWR | os.O_APPEND, own_dirs=own)
    except FileNotFoundError:
        if not create:
            raise
    make_directory(Path(path).parent, own_dirs=own)
    return open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, own_dirs=own)


def _own_dirs(path: str) -> int:
    """The store's directories above an index file (`.ids/`, and `.firsts/`
    for a column), opened without following a link."""
    return 2 if os.path.basename(os.path.dirname(path)) == FIRSTS else 1


def _hash(entry_id: str) -> bytes:
    return hashlib.blake2b(entry_id.encode(), digest_size=8).digest()


def _header(fd: int) -> bytes:
    status = os.fstat(fd)
    line = os.pread(fd, 1024, 0)  # a header line is short...
    cut = line.find(b"\n")
    line = line[:cut] if cut >= 0 else first_line(fd, status.st_size)  # ...most often
    digest = hashlib.blake2b(line, digest_size=8).digest()
    return _HEADER.pack(_MAGIC, status.st_dev, status.st_ino, digest)


def _mark(fd: int, end: int, data: bytes) -> bytes:
    """A mark: the file is covered up to ``end``, where ``data`` ends, sealed
    by a digest of the bytes before (and their length)."""
    if len(data) >= _WINDOW:
        window = data[-_WINDOW:]
    else:
        window = os.pread(fd, min(_WINDOW, end), max(0, end - _WINDOW))
    seal = hashlib.blake2b(window, digest_size=6).digest() + len(window).to_bytes(2, "little")
    return _RECORD.pack(seal, -1 - end)


def _sealed(fd: int, covered: int, seal: bytes) -> bool:
    """Whether the file's bytes before ``covered`` are those a mark's seal saw."""
    length = int.from_bytes(seal[6:], "little")
    if not 0 < length <= min(covered, _WINDOW) or covered > os.fstat(fd).st_size:
        return False
    window = os.pread(fd, length, covered - length)
    return hashlib.blake2b(window, digest_size=6).digest() == seal[:6]


def _last_mark(index: int, header: bytes, length: int) -> tuple[int, int, bytes] | None:
    """Where the index's last mark is, the end it covers, and its digest (None: none)."""
    if os.pread(index, _HEADER.size, 0) != header:
        return None
    position = _HEADER.size + (length - _HEADER.size) // _RECORD.size * _RECORD.size
    while position > _HEADER.size:  # records after the last mark: a torn write
        position -= _RECORD.size
        digest, value = _RECORD.unpack(os.pread(index, _RECORD.size, position))
        if value < 0:
            return position, -1 - value, digest
    return None


def _covered(index: int, header: bytes, size: int) -> tuple[int, int] | None:
    """How far an index ready for more records covers a file of ``size``
    bytes, and how many records it holds (None: unusable)."""
    length = os.fstat(index).st_size
    found = _last_mark(index, header, length)
    if found is None:
        return None
    position, covered, _ = found
    if position + _RECORD.size != length or covered > size:
        return None  # a torn write after it, or a file cut back since
    return covered, (length - _HEADER.size) // _RECORD.size


def _look_up(index: int, firsts: str, fd: int, kept: str, end: int) -> tuple[list[int], int] | None:
    """The offsets before ``end`` the index has for ``kept``, and how far it
    covers (None: it does not hold for this file)."""
    found = _last_mark(index, _header(fd), os.fstat(index).st_size)
    if found is None:
        return None
    position, covered, digest = found
    if not _sealed(fd, covered, digest):
        return None
    wanted = _hash(kept)
    count = (position - _HEADER.size) // _RECORD.size  # records before the last mark
    rows = _rows_from_firsts(firsts, count, wanted)
    if rows is None:
        rows = _rows(index, count, wanted)
    offsets = []
    for row in rows:
        found, offset = _RECORD.unpack(os.pread(index, _RECORD.size, _at(row)))
        if found == wanted and 0 <= offset < end:
            offsets.append(offset)
    return offsets, covered


def _rows_from_firsts(firsts: str, count: int, wanted: bytes) -> list[int] | None:
    """The records among the first ``count`` whose hash starts as ``wanted``,
    from the column (None: it lags behind)."""
    try:
        column = open_regular(firsts, os.O_RDONLY, own_dirs=2)
    except OSError:
        return None
    try:
        if count == 0 or os.fstat(column).st_size < count * _FIRST:
            return None
        return _aligned(column, count * _FIRST, 0, wanted[:_FIRST], _FIRST)
    finally:
        os.close(column)


def _rows(index: int, count: int, wanted: bytes) -> list[int]:
    """The same, read from the records themselves."""
    return _aligned(index, _at(count), _HEADER.size, wanted, _RECORD.size)


def _aligned(fd: int, length: int, start: int, needle: bytes, width: int) -> list[int]:
    """The ``width``-byte slots from ``start`` (of ``length`` bytes) that begin with ``needle``."""
    found = []
    with mmap.mmap(fd, length, access=mmap.ACCESS_READ) as data:
        at = data.find(needle, start)
        while at >= 0:
            if (at - start) % width == 0:
                found.append((at - start) // width)
            at = data.find(needle, at + 1)
    return found


def _at(row: int) -> int:
    """Where record number ``row`` starts in the index."""
    return _HEADER.size + row * _RECORD.size


def _firsts(records: bytes) -> bytes:
    """The first `_FIRST` bytes of each record."""
    return bytes(memoryview(records).cast("I")[:: _RECORD.size // _FIRST])


def _line_at(fd: int, offset: int) -> bytes:
    line = b""
    while True:
        chunk = os.pread(fd, CHUNK, offset + len(line))
        cut = chunk.find(b"\n")
        if cut >= 0 or not chunk:
            return line + (chunk if cut < 0 else chunk[:cut])
        line += chunk


def _holds(fd: int, offset: int, kept: str) -> bool:
    """Whether the line at ``offset`` is a message with the id ``kept``."""
    try:
        entry = decode_stored_entry(
            "", _line_at(fd, offset).removesuffix(b"\r"), path=None, line_no=0
        )
    except CorruptSessionError:
        return False  # reported, with its line, when the file is loaded
    return isinstance(entry, MessageEntry) and entry.id == kept


def _messages(fd: int, start: int, end: int) -> list[bytes]:
    """Records of the message lines from ``start`` to ``end`` (not the header)."""

    data = os.pread(fd, end - start, start)
    records, offset = [], start
    for line in data.split(b"\n")[:-1]:
        if offset:
            try:
                entry = decode_stored_entry("", line.removesuffix(b"\r"), path=None, line_no=0)
            except CorruptSessionError:
                entry = None
            if isinstance(entry, MessageEntry):
                records.append(_RECORD.pack(_hash(entry.id), offset))
        offset += len(line) + 1
    return records
