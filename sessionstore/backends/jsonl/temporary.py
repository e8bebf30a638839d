"""New files written aside, then published whole: sessions, forks, imports, archive files.

The file is written to ``.<id>.jsonl.<kind>-<32 hex digits>`` (no session id
names it: `list` never reads it), then linked to ``<id>.jsonl`` (``link``
never replaces a name) and unlinked: a process killed at any moment leaves
no session or a whole one. Its writer holds an exclusive ``flock`` on it
throughout; one left unlocked by a dead writer is no fault, and the next
fork or import deletes it (`sweep`) once older than `ABANDONED_AFTER`, so
that one seen between its creation and its lock is never taken.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sessionstore.backends.files import (
    FILE_MODE,
    NotRegularFileError,
    fsync_directory,
    make_directory,
    open_regular,
)
from sessionstore.backends.jsonl.file import stamp
from sessionstore.errors import DuplicateSessionError

__all__ = ["ABANDONED_AFTER", "Temporary", "refuse_taken", "sweep"]

ABANDONED_AFTER = 60.0
"""Seconds after which an unlocked temporary is known to be abandoned."""

_NAME = re.compile(r"\..+\.(fork|import)-[0-9a-f]{32}")


@dataclass
class Temporary:
    """A new session file being written under a temporary name, open and
    exclusively locked; ``final`` is its name once published."""

    path: Path
    fd: int
    final: Path
    new_directory: bool

    @classmethod
    def create(cls, final: Path, kind: str, *, swept: bool = True) -> Temporary:
        """Create and lock a temporary beside ``final``, first deleting dead
        writers' leftovers when ``swept`` (not for a header: written often)."""
        new_directory = make_directory(final.parent)
        if swept:
            sweep(final.parent)
        path = final.parent / f".{final.name}.{kind}-{uuid.uuid4().hex}"
        fd = open_regular(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        return cls(path, fd, final, new_directory)

    def publish(self, session_id: str, *, full: bool, replace: bool = False) -> None:
        """Give the temporary its session's name, durably when ``full``; with
        ``replace``, in place of the session's file (whose lock its writer holds)."""
        stamp(self.fd)  # the session's last activity: now
        if full:
            os.fsync(self.fd)  # the bytes before the name that makes them a session
        try:
            if replace:
                os.replace(self.path, self.final)
            else:
                os.link(self.path, self.final)
        except FileExistsError:
            refuse_taken(self.final, session_id)
            raise
        if full:
            fsync_directory(self.final.parent)
            if self.new_directory:
                fsync_directory(self.final.parent.parent)

    def close(self) -> None:
        """Remove the temporary's name (published or not), then release it."""
        try:
            self.path.unlink(missing_ok=True)  # while locked: never seen as a leftover
        finally:
            os.close(self.fd)


def refuse_taken(final: Path, session_id: str) -> None:
    """Refuse a session file name that is taken: `DuplicateSessionError`, or
    `NotRegularFileError` when no regular file has it."""
    try:
        mode = os.lstat(final).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(final, mode)
    raise DuplicateSessionError(session_id)


def sweep(directory: Path) -> list[Path]:
    """Delete (and return) the temporaries in ``directory`` whose writer died."""

    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    swept = []
    for name in names:
        if _NAME.fullmatch(name) is None:
            continue
        path = directory / name
        try:
            fd = open_regular(path, os.O_RDONLY)
        except OSError:
            continue  # unlinked meanwhile, or nothing a writer of ours made
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if time.time() - os.fstat(fd).st_mtime > ABANDONED_AFTER:
                path.unlink(missing_ok=True)
                swept.append(path)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            # its writer is alive and at work
        finally:
            os.close(fd)
    return swept
