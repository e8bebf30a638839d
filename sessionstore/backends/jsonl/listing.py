"""What `JsonlStore.summaries` pages through: the order a listing found on
its first page, kept between its pages (docs/jsonl.md, "Listings").

A session's last activity is its file's time (`file.stamp`), and a session
written after the first page would move under a keyset on it: so the first
page scans, sorts and keeps the order (ids and inodes) in
``<dir>/.listings/<token>`` (a digest of the order: asked again, the same
file), written aside and renamed, kept `KEPT_FOR` seconds and at most
`KEPT_AT_MOST`; later pages read on by position. Where it cannot be
written the store object holds it. The same store object's writes wait
for the scans asked before them (`ListingGate`).

The kept order is what makes paging exact, not a cache: `drop_caches`
leaves the orders this object holds, which its cursors name. It also
spares a later page a scan (benchmarks/caches.py): among 100,000 sessions
0.50 s against 3.2 s by activity, 0.62 s against 10.4 s by creation.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import stat
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from sessionstore.backends.cursors import Cursor
from sessionstore.backends.files import (
    FILE_MODE,
    make_directory,
    open_regular,
    remove_file,
    write_all,
)
from sessionstore.backends.jsonl.file import SUFFIX, read_header
from sessionstore.backends.jsonl.titles import changes_of
from sessionstore.errors import (
    CorruptSessionError,
    InvalidCursorError,
    SessionStoreError,
    validate_session_id,
)
from sessionstore.models import SessionMeta, TitleChange
from sessionstore.store import Order

__all__ = [
    "KEPT_AT_MOST",
    "KEPT_FOR",
    "LISTINGS",
    "Facts",
    "Kept",
    "ListingGate",
    "Listings",
    "Row",
    "after_key",
    "facts",
    "scan",
]

logger = logging.getLogger(__name__)

LISTINGS = ".listings"
"""``<dir>/.listings/<token>``: the order of a listing by last activity."""

KEPT_FOR = 3600.0
"""Seconds a listing's order is kept after its last page."""

KEPT_AT_MOST = 100
"""Listing orders kept at most: the least recently used beyond go."""

_MAGIC = "sessionstore listing 1"
_TOKEN = re.compile(r"[0-9a-f]{32}")
_TEMPORARY = re.compile(r"\.[0-9a-f]{32}\.[0-9a-f]{32}")
_ABANDONED_AFTER = 60.0  # seconds: a temporary this old lost its writer

_GONE = (
    "this listing's order is no longer kept (an hour after its last page, or after"
    f" {KEPT_AT_MOST} newer listings): start again, without after="
)


@dataclass(frozen=True)
class Row:
    """A session as a listing found it: its id, its file's inode (another when
    erased and made again), and its sort key (None when read back from a kept order)."""

    session_id: str
    inode: int
    key: int | str | None = None


def scan(directory: Path, order: Order, owner: str | None) -> list[Row]:
    """Every session in the listing's order, newest first, ties by id descending
    (of ``owner``, when given). A header read (by creation, or for an owner)
    that is no sound one leaves its file out, with a warning as `list` gives."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found: list[tuple[tuple[int | str, str], int]] = []
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        session_id, path = name[: -len(SUFFIX)], directory / name
        try:
            validate_session_id(session_id)
            status = os.lstat(path)
        except (SessionStoreError, OSError):
            continue  # no session's name, or gone meanwhile
        if not stat.S_ISREG(status.st_mode):
            continue
        key: tuple[int | str, str] = (status.st_mtime_ns, session_id)
        if order == "created" or owner is not None:
            try:
                meta = read_header(path, session_id)
            except FileNotFoundError:
                continue
            except (SessionStoreError, OSError) as exc:
                _skipping(path, exc)
                continue
            if owner not in (None, meta.owner):
                continue
            if order == "created":
                key = (meta.created_at, session_id)
        found.append((key, status.st_ino))
    found.sort(reverse=True)
    return [Row(key[1], inode, key[0]) for key, inode in found]


def after_key(directory: Path, order: Order, owner: str | None, key: tuple[str, ...]) -> list[Row]:
    """The rows that follow ``key`` on a scan made now: a later page of a listing
    whose order was not kept; exact while nothing is written between its pages.

    Raises:
        InvalidCursorError: ``key`` is no key of such a listing.
    """
    sort, session_id = key
    if order == "created":
        mark: int | str = sort
    elif sort.isdigit():
        mark = int(sort)
    else:
        raise InvalidCursorError("not a cursor of this store's listings")
    rows = scan(directory, order, owner)
    # Newest first: the rows after the mark are those whose key is lower.
    return [row for row in rows if (row.key, row.session_id) < (mark, session_id)]


def _skipping(path: Path, exc: Exception) -> None:
    reason = f"{path}: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)
    logger.warning("skipping %s: not listed", reason)


@dataclass(frozen=True)
class Facts:
    """What a summary needs besides the session's entries (``active_ns``: the
    file's time; ``fault``: why its titles do not read back)."""

    meta: SessionMeta
    active_ns: int
    changes: list[TitleChange]
    fault: str | None


def facts(directory: Path, session_id: str, inode: int) -> Facts | None:
    """The facts of a session a listing found in the file ``inode``; None when it
    is gone or its header is no sound one (skipped with a warning, as `list`)."""
    path = directory / f"{session_id}{SUFFIX}"
    try:
        status = os.lstat(path)
        if not stat.S_ISREG(status.st_mode) or status.st_ino != inode:
            return None
        meta = read_header(path, session_id)
    except FileNotFoundError:
        return None
    except (SessionStoreError, OSError) as exc:
        _skipping(path, exc)
        return None
    try:
        changes, fault = changes_of(directory, session_id), None
    except CorruptSessionError as exc:
        changes, fault = [], str(exc)
    except OSError as exc:
        changes, fault = [], f"{exc.filename}: {exc.strerror or exc}"
    return Facts(meta, status.st_mtime_ns, changes, fault)


class ListingGate:
    """Holds a store object's writes until the listings asked before them
    have scanned the files: a write waits only for those."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scans: set[Future[None]] = set()

    @contextlib.contextmanager
    def scanning(self) -> Iterator[None]:
        """While a first page scans (entered before its first ``await``)."""
        done: Future[None] = Future()
        with self._lock:
            self._scans.add(done)
        try:
            yield
        finally:
            with self._lock:
                self._scans.discard(done)
            done.set_result(None)

    async def passed(self) -> None:
        """Wait for the scans begun so far (at once, without yielding, when
        there is none)."""
        with self._lock:
            scans = list(self._scans)
        for scan in scans:
            await asyncio.wrap_future(scan)


@dataclass(frozen=True)
class Kept:
    """The order of a listing by last activity, as its first page found it:
    ``token`` its name (empty: nothing to page through), ``begun_ns`` when it
    began (a session erased after is left out), ``rows`` newest first."""

    token: str
    begun_ns: int
    rows: list[Row]


class Listings:
    """The listing orders of the store in ``directory``, kept in ``.listings/`` (or
    by this object where that cannot be written); with ``keep=False`` not kept,
    later pages going on by key (`after_key`)."""

    def __init__(self, directory: Path, *, keep: bool = True) -> None:
        self._dir = directory / LISTINGS
        self._keep = keep
        self._held: OrderedDict[str, tuple[float, str, Kept]] = OrderedDict()
        self._held_lock = threading.Lock()  # pages run in worker threads

    def begin(self, kind: str, order: Order, owner: str | None) -> Kept:
        """The first page of a listing ``kind``: its order (`scan`), kept
        (when there is any)."""
        begun = time.time_ns()
        rows = scan(self._dir.parent, order, owner)
        if not rows or not self._keep:  # not kept: later pages go on by key
            return Kept("", begun, rows)
        return self.keep(kind, begun, rows)

    def resume(self, cursor: Cursor) -> tuple[Kept, int]:
        """A later page: the order the cursor's listing kept, and how many rows went before.

        Raises:
            InvalidCursorError: no such order is kept, or the cursor names no row of it.
        """
        kept = self.find(cursor.kind, cursor.mark)
        position, session_id = cursor.key
        at = int(position) if position.isdigit() else 0
        if not 0 < at <= len(kept.rows) or kept.rows[at - 1].session_id != session_id:
            raise InvalidCursorError("not a cursor of this listing")
        return kept, at

    def keep(self, kind: str, begun_ns: int, rows: list[Row]) -> Kept:
        """Keep the order ``rows`` of a listing ``kind`` begun at ``begun_ns``."""
        body = "".join(f"{row.inode} {row.session_id}\n" for row in rows).encode()
        digest = hashlib.blake2b(f"{kind}\n".encode(), digest_size=16)
        digest.update(body)
        kept = Kept(digest.hexdigest(), begun_ns, rows)
        head = f"{_MAGIC} {kind} {begun_ns} {len(rows)}\n".encode()
        try:  # the same order again is the same file: its time is the last
            self._write(kept.token, head + body)
        except OSError:  # a read-only directory, a full disk: held here
            self._hold(kind, kept)
        return kept

    def find(self, kind: str, token: str) -> Kept:
        """The order kept under ``token`` for a listing ``kind``.

        Raises:
            InvalidCursorError: no such order is kept (any more).
        """
        if _TOKEN.fullmatch(token) is None:
            raise InvalidCursorError("not a cursor of this store's listings")
        with self._held_lock:
            held = self._held.get(token)
        if held is not None and held[0] > time.monotonic() - KEPT_FOR and held[1] == kind:
            self._hold(kind, held[2])
            return held[2]
        kept = self._read(kind, token)
        if kept is None:
            raise InvalidCursorError(_GONE)
        return kept

    def _hold(self, kind: str, kept: Kept) -> None:
        """Keep an order in this object, forgetting those unused for `KEPT_FOR`
        seconds and the least recently used beyond `KEPT_AT_MOST`."""
        now = time.monotonic()
        with self._held_lock:
            self._held[kept.token] = (now, kind, kept)
            self._held.move_to_end(kept.token)
            for old in list(self._held):
                if len(self._held) > KEPT_AT_MOST or self._held[old][0] <= now - KEPT_FOR:
                    del self._held[old]

    def _write(self, token: str, data: bytes) -> None:
        make_directory(self._dir, own_dirs=1)
        temporary = self._dir / f".{token}.{uuid.uuid4().hex}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd = open_regular(temporary, flags, FILE_MODE, own_dirs=1)
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(temporary, self._dir / token)  # whole or absent
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        with contextlib.suppress(OSError):  # the order is kept; the next one sweeps
            self._sweep()

    def _read(self, kind: str, token: str) -> Kept | None:
        """The order in the file ``token``, of a listing ``kind``, touched;
        None when there is none, or it is not whole."""
        path = self._dir / token
        try:
            fd = open_regular(path, os.O_RDONLY, own_dirs=1)
        except OSError:
            return None
        try:
            with open(fd, "rb", closefd=False) as file:
                data = file.read()
            with contextlib.suppress(OSError):  # its last use: kept KEPT_FOR from now
                os.utime(fd)
        finally:
            os.close(fd)
        lines = data.decode("utf-8", "replace").split("\n")
        if lines.pop() != "" or not lines:
            return None
        fields = lines[0].rsplit(" ", 3)
        if len(fields) != 4 or fields[:2] != [_MAGIC, kind]:
            return None  # another listing's order
        begun, count = fields[2:]
        if not begun.isdigit() or count != str(len(lines) - 1):
            return None  # cut short
        rows = []
        for line in lines[1:]:
            inode, _, session_id = line.partition(" ")
            if not inode.isdigit():
                return None
            rows.append(Row(session_id, int(inode)))
        return Kept(token, int(begun), rows)

    def _sweep(self) -> None:
        """Remove the orders unused for `KEPT_FOR` seconds, the least recently
        used beyond `KEPT_AT_MOST`, and temporaries their writer left."""
        now = time.time()
        kept = []
        for name in os.listdir(self._dir):
            path = self._dir / name
            try:
                used = os.lstat(path).st_mtime
            except FileNotFoundError:
                continue
            if _TOKEN.fullmatch(name) is not None:
                if used > now - KEPT_FOR:
                    kept.append((used, name))
                    continue
            elif _TEMPORARY.fullmatch(name) is None or used > now - _ABANDONED_AFTER:
                continue
            with contextlib.suppress(FileNotFoundError):
                remove_file(path, own_dirs=1)
        kept.sort(reverse=True)
        for _, name in kept[KEPT_AT_MOST:]:
            with contextlib.suppress(FileNotFoundError):
                remove_file(self._dir / name, own_dirs=1)
