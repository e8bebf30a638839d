"""New session files written aside, then published whole: new sessions,
forks and imports.

A new session (its header), a fork (the copied prefix of its source) and
an import (streamed lines) write their new session file in one step or
several, and no reader may see it before it is whole, so they write it into a
temporary in the store's directory, ``.<id>.jsonl.<kind>-<32 hex digits>``,
then link it to ``<id>.jsonl`` (``link`` never replaces a name, so an
existing session is refused) and unlink the temporary. A process killed
before the link leaves no session, one killed after it a whole one: never
a part of one.

A temporary's name starts with a dot and does not end in ``.jsonl``: no
session id names it, and `list` never reads it. Its writer holds an
exclusive ``flock`` on it from the moment it is created to the moment it is
unlinked. A temporary left by a process that died (killed, or a power loss)
holds no lock. It is no session and no fault (nothing stored is lost): the
next fork or import in the directory deletes it (`sweep`), once it is
older than `ABANDONED_AFTER`, so that a temporary seen in the instant
between its creation and its lock is never taken for an abandoned one.
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
    """A new session file being written under a temporary name.

    Attributes:
        path: the temporary's name.
        fd: the temporary, open to read and write, exclusively locked.
        final: the session's file, its name once published.
        new_directory: whether creating it created the store's directory.
    """

    path: Path
    fd: int
    final: Path
    new_directory: bool

    @classmethod
    def create(cls, final: Path, kind: str, *, swept: bool = True) -> Temporary:
        """Create and lock a temporary beside ``final`` (``kind``: what writes
        it), the leftovers of dead writers deleted first unless not ``swept``
        (a new session's header, written often: the next fork or import
        sweeps)."""
        new_directory = make_directory(final.parent)
        if swept:
            sweep(final.parent)
        path = final.parent / f".{final.name}.{kind}-{uuid.uuid4().hex}"
        # Readable too: an import indexes what it wrote (`jsonl.ids.adopt`).
        fd = open_regular(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        return cls(path, fd, final, new_directory)

    def publish(self, session_id: str, *, full: bool) -> None:
        """Give the temporary its session's name, durably when ``full``.

        Raises:
            DuplicateSessionError: a session file has the name already.
            NotRegularFileError: something else has it (a FIFO, a link).
        """
        stamp(self.fd)  # the session's last activity: now
        if full:
            os.fsync(self.fd)  # the bytes before the name that makes them a session
        try:
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
    """Refuse a session file name that is taken.

    Raises:
        DuplicateSessionError: a session file has the name.
        NotRegularFileError: something else has it (a FIFO, a link).
    """
    try:
        mode = os.lstat(final).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(final, mode)
    raise DuplicateSessionError(session_id)


def sweep(directory: Path) -> list[Path]:
    """Delete the temporaries in ``directory`` whose writer died: unlocked,
    and last written more than `ABANDONED_AFTER` seconds ago. Returns them."""
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
