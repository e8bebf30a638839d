"""The JSONL store's erasure log: ``<dir>/erasures/log.jsonl``, one record per line
(a log of `sessionstore.backends.jsonl.records`; not ``erasures.jsonl``,
which is a session's name).

An erase writes its record *before* removing the file, so a crash between
the two leaves both. To tell that from an erased id used again for the same
bytes, the erase first notes the record and the file's device and inode in
``<dir>/.erasing/<kind>/<name>``, removed once the file is gone: a second
erase finding the note, its record, the same file and the same bytes only
finishes the removal. `pending` lists the notes whose file is still there.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from sessionstore.backends.files import (
    FILE_MODE,
    fsync_directory,
    make_directory,
    open_regular,
    remove_file,
    write_all,
)
from sessionstore.backends.jsonl.records import append_lines, read_lines
from sessionstore.backends.records import erasure_of
from sessionstore.errors import CorruptSessionError, InvalidRecordError
from sessionstore.models import Erasure
from sessionstore.timestamps import Timestamp, rfc3339_of_ns
from sessionstore.wire import decode_erasure, encode

__all__ = ["ERASING", "ERASURES", "ErasureLog", "FileId", "digest_file"]

ERASURES = "erasures"
"""``<dir>/erasures/log.jsonl``: every erasure record, oldest first."""

ERASING = ".erasing"
"""``<dir>/.erasing/<kind>/<name>``: the record of an erase not yet finished."""

FileId = tuple[int, int]
"""A file's device and inode."""

_LOG = "log.jsonl"
logger = logging.getLogger(__name__)
_KINDS: tuple[Literal["session", "journal"], ...] = ("session", "journal")


def digest_file(
    kind: Literal["session", "journal"],
    name: str,
    reason: str,
    fd: int,
    size: int,
    *,
    block: int,
) -> Erasure:
    """The record of erasing the first ``size`` bytes of the file ``fd``, read in
    blocks; a session's header is no line of it, a journal's torn last line is."""
    counted = _Counted(_blocks(fd, size, block))
    record = erasure_of(kind, name, reason, counted, 0)
    lines = counted.newlines
    if kind == "session":
        lines -= 1
    elif counted.last not in (b"", b"\n"):
        lines += 1  # a torn last line is a line too
    return record.model_copy(update={"lines": max(lines, 0)})


def _blocks(fd: int, size: int, block: int) -> Iterator[bytes]:
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(block, size - offset), offset)
        if not chunk:
            return
        offset += len(chunk)
        yield chunk


class _Counted:
    """Blocks passed through, their newlines counted."""

    def __init__(self, blocks: Iterable[bytes]) -> None:
        self._blocks = blocks
        self.newlines = 0
        self.last = b""

    def __iter__(self) -> Iterator[bytes]:
        for block in self._blocks:
            self.newlines += block.count(b"\n")
            self.last = block[-1:]
            yield block


class ErasureLog:
    """The erasure log of the store in ``directory`` (``full``: each record ``fsync``ed)."""

    def __init__(self, directory: Path, *, full: bool) -> None:
        self._dir = directory
        self._full = full
        self._path = directory / ERASURES / _LOG  # looked at before each context

    @property
    def path(self) -> Path:
        """The log file."""
        return self._path

    def _note(self, kind: str, name: str) -> Path:
        return self._dir / ERASING / kind / name

    def record(self, fresh: Erasure, file: FileId) -> Erasure:
        """Keep ``fresh``, the record of removing ``file`` (device, inode), about to
        happen, unless an erase of the same file and bytes recorded it and died
        before removing them: then that record. Call `done` once the file is gone."""
        noted = self._noted(fresh.kind, fresh.name)
        if noted is not None:
            earlier, where = noted
            same = (earlier.digest, earlier.lines) == (fresh.digest, fresh.lines)
            if same and where == file and earlier in self.read():
                return earlier
        note = self._note(fresh.kind, fresh.name)
        created = make_directory(note.parent, own_dirs=2)
        fd = open_regular(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE, own_dirs=2)
        try:
            write_all(fd, f"{encode(fresh)}\n{file[0]} {file[1]}\n".encode())
            if self._full:
                os.fsync(fd)
        finally:
            os.close(fd)
        if self._full:
            fsync_directory(note.parent)
            if created:
                fsync_directory(note.parent.parent)
        self._append(fresh)
        return fresh

    def add(self, record: Erasure) -> None:
        """Keep ``record``, of a removal that leaves no file to finish (a
        journal's keyed lines dropped: the file is replaced, not removed)."""
        self._append(record)

    def done(self, kind: str, name: str) -> None:
        """The bytes recorded are gone: forget the note of the erase."""
        with contextlib.suppress(FileNotFoundError):
            remove_file(self._note(kind, name), own_dirs=2)

    def _noted(self, kind: str, name: str) -> tuple[Erasure, FileId] | None:
        """The record and file identity in the note of an erase of ``name``."""
        try:
            fd = open_regular(self._note(kind, name), os.O_RDONLY, own_dirs=2)
        except FileNotFoundError:
            return None
        try:
            data = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
        line, _, where = data.partition(b"\n")
        device, _, inode = where.strip().partition(b" ")
        if not (device.isdigit() and inode.isdigit()):
            return None  # torn by a crash before its record was written
        try:
            return decode_erasure(line), (int(device), int(inode))
        except InvalidRecordError:
            return None

    def _append(self, record: Erasure) -> None:
        data = (encode(record) + "\n").encode()
        append_lines(self.path, data, full=self._full, what="erasure log")

    def read(self) -> list[Erasure]:
        """Every record, oldest first (none without a log)."""
        lines = read_lines(self.path, what="erasure log")
        records = []
        for number, line in enumerate(lines, 1):
            try:
                records.append(decode_erasure(line))
            except InvalidRecordError as exc:
                raise CorruptSessionError(
                    ERASURES, str(exc), path=str(self.path), line=number
                ) from None
        return records

    def erased_since(self, begun_ns: int) -> set[str]:
        """The sessions erased since ``begun_ns``, even where their ids are used
        again (and their new files got the old inodes back)."""
        try:
            changed = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return set()
        if changed < begun_ns - 1_000_000_000:  # a coarse stamp lags by a tick
            return set()
        try:
            records = self.read()
        except CorruptSessionError as exc:  # the files' inodes still tell
            logger.warning("listing without the erasure log: %s", exc)
            return set()
        since = Timestamp.parse(rfc3339_of_ns(begun_ns))
        return {
            record.name
            for record in records
            if record.kind == "session" and _not_before(record.at, since)
        }

    def pending(self, file_of: Callable[[str, str], FileId | None]) -> list[str]:
        """A fault for each erase that recorded its removal and died before it;
        ``file_of`` gives the identity of a session's or journal's file (None: gone)."""
        found = []
        for kind in _KINDS:
            try:
                names = sorted(os.listdir(self._dir / ERASING / kind))
            except FileNotFoundError:
                continue
            for name in names:
                noted = self._noted(kind, name)
                if noted is None or file_of(kind, name) != noted[1]:
                    continue
                found.append(
                    f"{self._note(kind, name)}: the erase of {kind} {name!r} did not finish:"
                    " erase it again to finish (its record is kept once)"
                )
        return found


def _not_before(at: str, since: Timestamp) -> bool:
    """Whether an erasure record's time is ``since`` or later."""
    try:
        return not Timestamp.parse(at) < since
    except ValueError:
        return False  # no time this store wrote
