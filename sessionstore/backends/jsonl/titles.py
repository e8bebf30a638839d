"""Titles given after creation: ``<dir>/titles/<id>.jsonl``, one change per line,
a log of `sessionstore.backends.jsonl.records`; the last is the title.

A change is written under the session file's exclusive lock (`open_locked`),
which an erase takes too: no change is written for a session being erased.
The erase removes this file after recording the erasure and before unlinking
the session's: a crash between leaves the erase unfinished (`integrity`
names it), and erasing again finishes it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

from sessionstore.backends.files import fsync_directory, remove_file
from sessionstore.backends.jsonl.file import (
    SUFFIX,
    file_id,
    id_files,
    named_file,
    open_locked,
    open_session,
)
from sessionstore.backends.jsonl.records import append_lines, read_lines
from sessionstore.errors import (
    CorruptSessionError,
    InvalidRecordError,
)
from sessionstore.models import TitleChange
from sessionstore.wire import decode_title_change, encode

__all__ = ["TITLES", "changes_of", "faults", "forget", "read_changes", "record_changes"]

TITLES = "titles"
"""``<dir>/titles/<id>.jsonl``: the title changes of the session ``id``."""


def _path(directory: Path, session_id: str) -> Path:
    return directory / TITLES / f"{session_id}{SUFFIX}"


class _Held(Exception):
    """The file holds another number of changes than the caller knows of."""


def record_changes(
    directory: Path,
    session_id: str,
    changes: Sequence[TitleChange],
    *,
    full: bool,
    after: int | None = None,
) -> int:
    """Append ``changes`` to the session's file of titles in one write, all or
    none, the session's file locked; how many: 0 when it held another number
    than ``after`` (None: any)."""
    session = directory / f"{session_id}{SUFFIX}"
    fd = open_locked(session_id, session, os.O_RDONLY)
    try:  # the lock is held until the file is closed: no erase meanwhile
        if not changes:
            return 0
        data = "".join(encode(change) + "\n" for change in changes).encode()

        def check(held: bytes) -> None:
            if after is not None and held.count(b"\n") != after:
                raise _Held

        try:
            append_lines(
                _path(directory, session_id),
                data,
                full=full,
                what=f"titles of session {session_id!r}",
                check=check,
            )
        except _Held:
            return 0
        return len(changes)
    finally:
        os.close(fd)


def read_changes(directory: Path, session_id: str) -> list[TitleChange]:
    """The title changes of an existing session, oldest first, read under the
    session file's shared lock: an erase takes both under the exclusive one."""
    path = directory / f"{session_id}{SUFFIX}"
    while True:
        fd = open_session(session_id, path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if file_id(fd) == named_file(path):
                return changes_of(directory, session_id)
        finally:
            os.close(fd)
        # Erased while we waited: look at the name again.


def changes_of(directory: Path, session_id: str) -> list[TitleChange]:
    """The changes in the session's file of titles (none without one); the
    session itself is not looked for."""
    path = _path(directory, session_id)
    changes = []
    for number, line in enumerate(read_lines(path, what=f"titles of session {session_id!r}"), 1):
        try:
            change = decode_title_change(line)
        except InvalidRecordError as exc:
            raise CorruptSessionError(session_id, str(exc), path=str(path), line=number) from None
        if change.session_id != session_id:
            reason = f"a title change of session {change.session_id!r}"
            raise CorruptSessionError(session_id, reason, path=str(path), line=number)
        changes.append(change)
    return changes


def forget(directory: Path, session_id: str) -> None:
    """Remove the session's file of titles, durably (the session is being
    erased: its titles are erased with it)."""
    path = _path(directory, session_id)
    try:
        remove_file(path, own_dirs=1)
    except FileNotFoundError:
        return
    fsync_directory(path.parent)


def faults(directory: Path) -> list[str]:
    """What is wrong with the files of titles, each naming its file (a file
    whose session is gone among them)."""
    titles = directory / TITLES
    session_ids, found = id_files(titles, "file of titles", "not read")
    for session_id in session_ids:
        name = f"{session_id}{SUFFIX}"
        path = titles / name
        try:
            changes_of(directory, session_id)
        except CorruptSessionError as exc:
            found.append(str(exc))
        except OSError as exc:
            found.append(f"{path}: {exc.strerror or exc}")
        # An erase removes the titles before the session: a session missing
        # while its titles are still there was removed behind the store.
        if not (directory / name).exists() and path.exists():
            found.append(f"{path}: the titles of no session (its file is gone)")
    return found
