"""`JsonlStore`: one JSONL file per session in a directory (SPEC section 3).

Session ``<id>`` lives in ``<dir>/<id>.jsonl``: line 1 is the header, each
further line one entry, every line in the canonical wire form. The files
are the same the Rust implementation writes and reads.

Crash safety:

* Each append (or `append_many` batch) goes out in one ``write`` of whole
  lines, under an exclusive advisory lock (``flock``) on the file, so two
  processes appending to one session never interleave, and a load never
  mistakes a line still being written for a torn one.
* Everything after the last ``\\n`` is the remnant of a crash: a load drops
  it (with a warning) and truncates the file to the last ``\\n``, and so does
  the next append before writing, so later lines never fuse onto it.
* ``durability="normal"`` (default): an append that returned has reached
  the operating system and survives a crash of the process.
  ``durability="full"``: it is also ``fsync``ed (and a new file's directory
  entry too), so it survives a power loss.

A batch is all-or-nothing against refused entries and process crashes. A
power loss in the middle of a large batch's single ``write`` can leave its
first lines on disk; the torn last one is dropped at the next load.

Journals (`journal`) are `FileJournal` files in
``<dir>/journals/<name>/session_journal.jsonl``.

Locks are POSIX ``flock`` locks: advisory, honoured by every sessionstore
process on the machine, not by other programs writing the same files.
"""

from __future__ import annotations

import asyncio
import builtins
import errno
import fcntl
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from sessionstore.backends._common import (
    StoreBase,
    decode_stored_entry,
    decode_stored_meta,
    entry_lines,
    header_line,
)
from sessionstore.backends._files import (
    FILE_MODE,
    complete_length,
    fsync_directory,
    write_all,
)
from sessionstore.backends.file_journal import JOURNAL_FILE, FileJournal
from sessionstore.errors import (
    ConfigurationError,
    CorruptSessionError,
    DuplicateSessionError,
    SessionNotFoundError,
    SessionStoreError,
    StorageError,
    validate_session_id,
)
from sessionstore.models import SessionMeta
from sessionstore.store import Entry

__all__ = ["Durability", "JsonlStore"]

logger = logging.getLogger(__name__)

Durability = Literal["normal", "full"]
SUFFIX = ".jsonl"
JOURNALS = "journals"  # <dir>/journals/<name>/session_journal.jsonl
_T = TypeVar("_T")


class JsonlStore(StoreBase):
    """A directory of JSONL session files; see `SessionStore` for the contract.

    Args:
        directory: where the session files live; created on the first
            `create`. A missing directory lists nothing.
        durability: ``"normal"`` (survives a process crash) or ``"full"``
            (``fsync`` on every write: survives a power loss).
    """

    def __init__(self, directory: str | os.PathLike[str], *, durability: Durability = "normal"):
        if durability not in ("normal", "full"):
            raise ConfigurationError(f"durability must be 'normal' or 'full', not {durability!r}")
        self._dir = Path(directory)
        if self._dir.is_file():
            raise ConfigurationError(f"{str(self._dir)!r} is a file, not a session directory")
        self._full = durability == "full"

    def __repr__(self) -> str:
        return f"JsonlStore({str(self._dir)!r})"

    @property
    def directory(self) -> Path:
        """The directory holding the session files."""
        return self._dir

    def journal(self, name: str) -> FileJournal:
        """The journal file ``<dir>/journals/<name>/session_journal.jsonl``."""
        validate_session_id(name)
        self._check_open(name)
        return FileJournal(self._dir / JOURNALS / name / JOURNAL_FILE)

    async def journals(self) -> builtins.list[str]:
        self._check_open()

        def names() -> builtins.list[str]:
            try:
                found = sorted(os.listdir(self._dir / JOURNALS))
            except FileNotFoundError:
                return []
            return [n for n in found if (self._dir / JOURNALS / n / JOURNAL_FILE).is_file()]

        return await self._run(None, names)

    def path(self, session_id: str) -> Path:
        """The file of a session (after checking the id)."""
        return self._dir / f"{validate_session_id(session_id)}{SUFFIX}"

    async def _run(self, session_id: str | None, call: Callable[[], _T]) -> _T:
        """Run blocking file work off the event loop; OS errors become `StorageError`."""
        try:
            return await asyncio.to_thread(call)
        except SessionStoreError:
            raise
        except OSError as exc:
            where = exc.filename if exc.filename is not None else self._dir
            raise StorageError(f"{where}: {exc.strerror or exc}", session_id=session_id) from exc

    # ------------------------------------------------------------ create

    async def create(self, meta: SessionMeta) -> str:
        line = (header_line(meta) + "\n").encode()
        self._check_open(meta.id)
        await self._run(meta.id, lambda: self._create(meta.id, line))
        return meta.id

    def _create(self, session_id: str, line: bytes) -> None:
        new_dir = not self._dir.is_dir()
        self._dir.mkdir(parents=True, exist_ok=True)
        path = self.path(session_id)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
        except FileExistsError:
            raise DuplicateSessionError(session_id) from None
        try:
            write_all(fd, line)
            if self._full:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)  # no header-less file left behind
            raise
        os.close(fd)
        if self._full:
            fsync_directory(self._dir)
            if new_dir:
                fsync_directory(self._dir.parent)

    # ------------------------------------------------------------ append

    async def append_many(self, session_id: str, entries: Sequence[Entry]) -> None:
        self._check(session_id)
        data = "".join(line + "\n" for line in entry_lines(session_id, entries)).encode()
        await self._run(session_id, lambda: self._append(session_id, data))

    def _append(self, session_id: str, data: bytes) -> None:
        path = self.path(session_id)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except FileNotFoundError:
            raise SessionNotFoundError(session_id) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._repair(session_id, path, fd)
            if data:
                write_all(fd, data)
                if self._full:
                    os.fdatasync(fd)
        finally:
            os.close(fd)  # releases the lock

    def _repair(self, session_id: str, path: Path, fd: int) -> None:
        """Cut a crash-torn tail; the caller holds the exclusive lock."""
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) == b"\n":
            return
        keep = complete_length(fd, size)
        if keep < size:
            logger.warning(
                "session %r: dropping %d bytes of a crash-truncated last line in %s",
                session_id,
                size - keep,
                path,
            )
            os.truncate(path, keep)
            if self._full:
                os.fsync(fd)
        if keep == 0:
            raise CorruptSessionError(
                session_id, "empty session file (missing header line)", path=str(path)
            )

    # ------------------------------------------------------------ load

    async def load(self, session_id: str) -> builtins.list[Entry]:
        self._check(session_id)
        return await self._run(session_id, lambda: self._load(session_id))

    def _load(self, session_id: str) -> builtins.list[Entry]:
        path = self.path(session_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise SessionNotFoundError(session_id) from None
        try:
            # Shared: no append is halfway through its write while we read.
            fcntl.flock(fd, fcntl.LOCK_SH)
            with os.fdopen(os.dup(fd), "rb") as file:
                data = file.read()
            keep = data.rfind(b"\n") + 1
            if keep < len(data):
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._repair(session_id, path, fd)
        finally:
            os.close(fd)
        return self._parse(session_id, path, data[:keep])

    @staticmethod
    def _parse(session_id: str, path: Path, data: bytes) -> builtins.list[Entry]:
        lines = data.split(b"\n")
        lines.pop()  # what follows the last newline: nothing
        if not lines:
            raise CorruptSessionError(
                session_id, "empty session file (missing header line)", path=str(path)
            )
        where = str(path)
        decode_stored_meta(session_id, lines[0].removesuffix(b"\r"), path=where, line_no=1)
        return [
            decode_stored_entry(session_id, line.removesuffix(b"\r"), path=where, line_no=number)
            for number, line in enumerate(lines[1:], start=2)
        ]

    # ------------------------------------------------------------ list

    async def list(self) -> builtins.list[SessionMeta]:
        self._check_open()
        return await self._run(None, self._list)

    def _list(self) -> builtins.list[SessionMeta]:
        try:
            names = sorted(os.listdir(self._dir))
        except FileNotFoundError:
            return []
        metas = []
        for name in names:
            if name.endswith(SUFFIX):
                meta = self._read_header(self._dir / name, name[: -len(SUFFIX)])
                if meta is not None:
                    metas.append(meta)
        return metas

    @staticmethod
    def _read_header(path: Path, session_id: str) -> SessionMeta | None:
        """The header of one file, or None (with a warning) when it has none."""
        try:
            validate_session_id(session_id)
            with path.open("rb") as file:
                line = file.readline()
            if not line:
                logger.warning("skipping empty session file %s", path)
                return None
            if not line.endswith(b"\n"):
                logger.warning("skipping session file with a torn header: %s", path)
                return None
            return decode_stored_meta(
                session_id, line[:-1].removesuffix(b"\r"), path=str(path), line_no=1
            )
        except OSError as exc:
            reason = exc.strerror or exc
            if exc.errno == errno.EISDIR:
                reason = "a directory"
            logger.warning("skipping unreadable session file %s: %s", path, reason)
        except SessionStoreError as exc:
            logger.warning("skipping session file with an invalid header: %s", exc)
        return None
