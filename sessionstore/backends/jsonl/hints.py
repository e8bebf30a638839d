"""Where a long JSONL session's context starts, remembered beside the files.

The search for the first message with the last compaction's kept id cannot
change its answer while the bytes searched do not, so for a search of at
least `HINT_FROM` bytes its answer goes to ``<dir>/.kept/<id>``, with a
digest of the file's identity, the kept id, the end of search and the bytes
at both ends: a cache, checked before use (docs/jsonl.md, "Hints").

What it buys (benchmarks/caches.py): the first `load_context` of a new
store object on a session of 100,000 entries 1.2 ms with a hint, 104 ms
searching; of 1,000,000 entries 0.7 ms against 472 ms. Below `HINT_FROM`
there is none: the search is as quick as reading a hint.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
from pathlib import Path

from sessionstore.backends.files import make_directory, open_regular, remove_file
from sessionstore.backends.jsonl.context import first_kept_in

__all__ = ["HINTS", "HINT_FROM", "first_kept", "forget", "forget_ids"]

HINTS = ".kept"  # <dir>/.kept/<id>: no session id starts with a dot
HINT_FROM = 1 << 20  # bytes searched (about 1 ms) from which a hint is worth a file
_IDS = ".ids"  # <dir>/.ids/<id>, .ids/.firsts/<id>: an older version's index of ids
_WINDOW = 4096  # bytes at each end of the search that a hint's digest covers
_MAGIC = b"sessionstore kept hint 1\n"
_HINT = struct.Struct("<32sq")  # the digest, then the offset found (-1: none)


def first_kept(
    directory: Path,
    session_id: str,
    file: tuple[int, int],
    fd: int,
    kept: str,
    end: int,
    *,
    write: bool = True,
) -> int | None:
    """`first_kept_in` on the session file ``fd`` (its device and inode:
    ``file``), read from its hint when one holds, and with ``write`` written
    when none did."""

    if end < HINT_FROM:
        return first_kept_in(fd, kept, end)
    path = directory / HINTS / session_id
    digest = _digest(file, fd, kept, end)
    found = _read(path, digest)
    if found is not None:
        return None if found < 0 else found
    answer = first_kept_in(fd, kept, end)
    if write:
        _write(path, digest, -1 if answer is None else answer)
    return answer


def forget(directory: Path, session_id: str) -> None:
    """Remove the session's hint (the session is erased)."""
    with contextlib.suppress(FileNotFoundError):
        remove_file(directory / HINTS / session_id, own_dirs=1)


def forget_ids(directory: Path, session_id: str) -> None:
    """Remove the index of the session's message ids an earlier version kept
    in ``.ids/`` (hashes of its ids and their offsets; nothing reads it now):
    an erase removes every file written for the session."""
    index = directory / _IDS / session_id
    column = directory / _IDS / ".firsts" / session_id
    for path, own_dirs in ((index, 1), (column, 2)):
        with contextlib.suppress(FileNotFoundError):
            remove_file(path, own_dirs=own_dirs)


def _digest(file: tuple[int, int], fd: int, kept: str, end: int) -> bytes:
    digest = hashlib.blake2b(digest_size=32)
    digest.update(struct.pack("<QQQ", *file, end))
    digest.update(kept.encode() + b"\n")
    digest.update(os.pread(fd, min(_WINDOW, end), 0))
    digest.update(os.pread(fd, min(_WINDOW, end), max(0, end - _WINDOW)))
    return digest.digest()


def _read(path: Path, digest: bytes) -> int | None:
    """The offset the hint at ``path`` holds for ``digest`` (-1: none), or None."""
    try:
        # A regular file only (a FIFO there must not block the load), and no
        # more of it than a hint holds.
        fd = open_regular(path, os.O_RDONLY, own_dirs=1)
    except OSError:
        return None  # no hint yet, or none readable: search
    try:
        data = os.read(fd, len(_MAGIC) + _HINT.size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) != len(_MAGIC) + _HINT.size or not data.startswith(_MAGIC):
        return None
    stored, found = _HINT.unpack_from(data, len(_MAGIC))
    return found if stored == digest and found >= -1 else None


def _write(path: Path, digest: bytes, found: int) -> None:
    """Write a hint whole (under a temporary name, then renamed), or not at all."""
    try:
        make_directory(path.parent, own_dirs=1)  # refused where `.kept/` is a link
        fd, temporary = tempfile.mkstemp(prefix=".", dir=path.parent)
    except OSError:
        return  # a read-only directory: the search runs again next time
    try:
        with os.fdopen(fd, "wb") as file:  # private to its owner, as the sessions
            file.write(_MAGIC + _HINT.pack(digest, found))
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
