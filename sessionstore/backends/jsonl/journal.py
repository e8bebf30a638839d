"""`FileJournal`: the session journal as a file in an agent's directory.

One JSON object per line in ``<agent_dir>/session_journal.jsonl``, the file
the Rust implementation writes. Appends hold an exclusive ``flock``, are
``fsync``ed (unless ``synced`` is False), whole or cut back, and always
start on a line of their own (a newline first after a torn one); reading
never fails on content. `erase` records under the lock, then unlinks: an
append that opened the file before and locks it after finds the name gone
or naming another file, and starts the journal again rather than writing
into the removed file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar, overload

from sessionstore.backends.base import JournalBase
from sessionstore.backends.files import (
    FILE_MODE,
    fsync_directory,
    in_thread,
    make_directory,
    open_regular,
    remove_file,
    truncate_back,
    write_all,
)
from sessionstore.backends.holding import Holding
from sessionstore.backends.jsonl.erasures import ErasureLog, digest_file
from sessionstore.backends.jsonl.file import file_id, named_file
from sessionstore.backends.jsonl.keyindex import FileKeyIndex, KeyIndexes
from sessionstore.backends.keyed import Keyed, Scanned, check_keys, dropped
from sessionstore.backends.records import raw_journal_lines
from sessionstore.effects import EFFECTS_FILE
from sessionstore.journal import READ, Journal
from sessionstore.models import Erasure
from sessionstore.wire import line_key

__all__ = ["JOURNAL_FILE", "FileJournal"]

JOURNAL_FILE = "session_journal.jsonl"
"""The journal's name inside an agent's directory."""

_T = TypeVar("_T")


class FileJournal(JournalBase):
    """A journal file; see `SessionJournal` for the contract.

    Args:
        path: the journal file. Its directory is created by the first
            append when missing.
        erasures: the erasure log of the store keeping the journal, where
            `erase` records it; None for a journal on its own.
        own_dirs: how many of the directories above the file are its
            store's (``journals/<name>/``: 2), never followed through a
            link; 0 for a journal on its own, whose directory may be one.
        indexes: where the index of its keyed lines is kept (a store's,
            shared by its journal objects); None: one of its own.
        synced: whether an append is ``fsync``ed (survives a power loss);
            if not, it survives a crash of the process (a store's journal
            at ``durability="store"`` in a store at ``"normal"``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        erasures: ErasureLog | None = None,
        own_dirs: int = 0,
        indexes: KeyIndexes | None = None,
        synced: bool = True,
    ) -> None:
        self._path = Path(path)
        self._synced = synced
        self._erasures = erasures
        self._own = own_dirs
        self._indexes = KeyIndexes() if indexes is None else indexes
        self._index: FileKeyIndex = self._indexes.of(self._path)

    @classmethod
    def in_dir(cls, agent_dir: str | os.PathLike[str]) -> FileJournal:
        """The journal in an agent's directory: ``<agent_dir>/session_journal.jsonl``."""
        return cls(Path(agent_dir) / JOURNAL_FILE)

    def __repr__(self) -> str:
        return f"FileJournal({str(self._path)!r})"

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._path

    async def _run(self, call: Callable[[], _T]) -> _T:
        return await in_thread(call, where=self._path, label="journal ")

    def _open(self) -> int | None:
        """The journal file open to read, or None when there is none."""
        try:
            return open_regular(self._path, os.O_RDONLY, own_dirs=self._own)
        except FileNotFoundError:
            return None

    async def read(self) -> Journal:
        """The journal as it stands, parsed as the file is read."""
        return await self._run(self._parse)

    def _parse(self) -> Journal:
        fd = self._open()
        if fd is None:
            return Journal()
        with open(fd, "rb") as file:
            return Journal.parse(file)

    async def read_bytes(self) -> bytes:
        """The file's bytes, whole; `read` and `read_blocks` stream instead."""
        return b"".join([block async for block in self.read_blocks()])

    async def read_blocks(self) -> AsyncIterator[bytes]:
        """The file's bytes in reads of `READ` bytes, from one open file."""
        holding = Holding(self._run)
        try:
            fd = await holding.open(self._open)
            if fd is None:
                return
            while block := await holding.call(partial(os.read, fd, READ)):
                yield block
        finally:
            # After the last read, in its thread if it was cancelled and runs
            # on: closed beside it, its number could be another file's.
            holding.close()

    async def append_raw(self, *lines: bytes) -> None:
        data = b"\n".join(raw_journal_lines(lines))
        if lines:
            await self._run(lambda: self._append(data))

    async def append_unless(
        self, found: Callable[[Iterator[bytes]], _T | None], *lines: bytes
    ) -> _T | None:
        data = b"\n".join(raw_journal_lines(lines))
        return await self._run(lambda: self._append(data, lambda fd: found(_lines_of(fd))))

    async def append_keyed_unless(
        self, keys: Sequence[str], found: Callable[[Keyed], _T | None], *lines: bytes
    ) -> _T | None:
        wanted = check_keys(keys)
        data = b"\n".join(raw_journal_lines(lines))
        return await self._run(lambda: self._append(data, partial(self._look, wanted, found)))

    def _look(self, keys: list[str], found: Callable[[Keyed], _T | None], fd: int) -> _T | None:
        """``found`` asked with the lines under ``keys`` of the locked file ``fd``."""
        with self._index.lock:
            self._index.catch_up(fd)
            held = self._index.lines(fd, keys)
        return found(held)

    def _append(self, line: bytes, look: Callable[[int], _T | None] | None = None) -> _T | None:
        """Append ``line`` (lines joined) under the file's lock, unless
        ``look`` finds in the file (given open) a reason not to."""
        fd = self._open_locked()
        try:
            if look is not None:
                seen = look(fd)
                if seen is not None:
                    return seen
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # never glue onto a torn line
            try:
                write_all(fd, line + b"\n")
                if self._synced:
                    os.fdatasync(fd)
            except OSError as exc:  # a full disk took part of it: all or nothing
                truncate_back(fd, size, exc)
                raise
        finally:
            os.close(fd)
        if size == 0 and self._synced:
            fsync_directory(self._path.parent)  # make the new name durable too
        return None

    async def _keyed(self, keys: list[str]) -> Keyed:
        return await self._run(partial(self._indexed, lambda fd: self._index.lines(fd, keys)))

    async def _scan(self, prefix: str, before: str | None, limit: int | None) -> Scanned:
        scan = partial(self._index.scan, prefix=prefix, before=before, limit=limit)
        return await self._run(partial(self._indexed, scan))

    def _indexed(self, read: Callable[[int | None], _T]) -> _T:
        """``read`` of the file as it stands (None: there is none), its index caught up."""
        fd = self._open()
        try:
            with self._index.lock:
                self._index.catch_up(fd)
                return read(fd)
        finally:
            if fd is not None:
                os.close(fd)

    @overload
    def _open_locked(self, *, create: Literal[True] = True) -> int: ...

    @overload
    def _open_locked(self, *, create: bool) -> int | None: ...

    def _open_locked(self, *, create: bool = True) -> int | None:
        """The journal file (created when missing, unless not ``create``:
        then None) open to append, under its exclusive lock, and still the
        file at its name once locked."""
        while True:
            directory = self._path.parent
            if create and make_directory(directory, own_dirs=self._own):
                fsync_directory(directory.parent)
            try:
                flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
                fd = open_regular(self._path, flags, FILE_MODE, own_dirs=self._own)
            except FileNotFoundError:  # its directory removed by an erase meanwhile
                if not create:
                    return None
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if file_id(fd) == named_file(self._path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # erased or replaced while we waited: start again

    def _effects_place(self) -> tuple[str | None, tuple[str, ...] | None]:
        if self._erasures is None:  # a journal of its own, in no store
            return None, None
        store = self._path.parent.parent.parent  # <dir>/journals/<name>/session_journal.jsonl
        return self._path.parent.name, ("--db", str(store))

    def _effects_journal(self) -> FileJournal:
        path = self._path.with_name(EFFECTS_FILE)
        return FileJournal(path, own_dirs=self._own, indexes=self._indexes)

    async def clear(self) -> None:
        await self._run(self._clear)

    def _clear(self) -> None:
        try:
            remove_file(self._path, own_dirs=self._own)
        except FileNotFoundError:
            return
        finally:
            with self._index.lock:
                self._index.forget()
        fsync_directory(self._path.parent)

    async def _drop(self, keys: list[str], reason: str) -> Erasure | None:
        return await self._run(partial(self._drop_lines, set(keys), reason))

    def _drop_lines(self, keys: set[str], reason: str) -> Erasure | None:
        """Write the file anew without the lines under ``keys``, under its
        lock, and rename it over the file; recorded before the rename."""
        fd = self._open_locked(create=False)
        if fd is None:
            return None
        temporary: Path | None = None
        try:
            kept, gone, named = [], [], set()
            for line in _lines_of(fd):
                key = line_key(line)
                if key in keys:
                    gone.append(line)
                    named.add(key)
                else:
                    kept.append(line)
            if not gone:
                return None
            record = dropped(self._path.parent.name, reason, gone, len(named))
            for stale in self._path.parent.glob(f".{self._path.name}.drop-*"):
                # Left by a drop that died: under the lock, no drop is writing one.
                with contextlib.suppress(FileNotFoundError):
                    remove_file(stale, own_dirs=self._own)
            temporary = self._path.with_name(f".{self._path.name}.drop-{uuid.uuid4().hex}")
            out = open_regular(
                temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE, own_dirs=self._own
            )
            try:
                write_all(out, b"".join(line + b"\n" for line in kept))
                os.fsync(out)
            finally:
                os.close(out)
            if self._erasures is not None:
                self._erasures.add(record)
            os.replace(temporary, self._path)  # under the old file's lock: appends open afresh
            temporary = None
            with self._index.lock:
                self._index.forget()
        finally:
            os.close(fd)
            if temporary is not None:
                with contextlib.suppress(OSError):
                    remove_file(temporary, own_dirs=self._own)
        fsync_directory(self._path.parent)
        return record

    async def _erase(self, reason: str) -> Erasure | None:
        return await self._run(partial(self._erase_file, reason))

    def _erase_file(self, reason: str) -> Erasure | None:
        name = self._path.parent.name
        try:
            fd = open_regular(self._path, os.O_RDWR, own_dirs=self._own)
        except FileNotFoundError:
            if self._erasures is not None:
                self._erasures.done("journal", name)  # a finished erase's note
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if file_id(fd) != named_file(self._path):
                return None  # erased while we waited for the lock
            size = os.fstat(fd).st_size
            if size == 0:
                return None  # holding nothing: left as it is
            record = digest_file("journal", name, reason, fd, size, block=READ)
            if self._erasures is not None:
                # Recorded before the file goes: see `sessionstore.backends.jsonl.erasures`.
                record = self._erasures.record(record, file_id(fd))
            remove_file(self._path, own_dirs=self._own)  # under the lock: an append opens afresh
        finally:
            os.close(fd)
        fsync_directory(self._path.parent)
        if self._erasures is not None:
            with contextlib.suppress(OSError):  # not empty: someone's files, kept
                remove_file(self._path.parent, own_dirs=max(0, self._own - 1), directory=True)
                fsync_directory(self._path.parent.parent)
            self._erasures.done("journal", name)
        return record


def _lines_of(fd: int) -> Iterator[bytes]:
    """The lines of an open file, from its start, without their newlines (a
    torn last one too), read `READ` bytes at a time."""
    offset, rest = 0, b""
    while chunk := os.pread(fd, READ, offset):
        offset += len(chunk)
        pieces = (rest + chunk).split(b"\n")
        rest = pieces.pop()
        yield from pieces
    if rest:
        yield rest
