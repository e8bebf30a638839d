"""Anchors: where each session stood, kept outside the store and checked later.

A store only adds to a session, so what it held it still holds, byte for
byte, unless an erasure recorded since removed it. An `Anchor` kept out of
reach of a writer with the database's file (another machine, a signed
commit) shows what that writer could hide: entries deleted from the end, a
session deleted, history rewritten with its digests, erasure records deleted.
`sessionstore.verify.verify_store` checks anchors and makes the next ones::

    report = await verify_store(store, anchors=read_anchors(path))
    if report.ok:
        write_anchors(path, report.anchors)

The command line does the same: ``sessionstore verify --anchors FILE``.
"""

from __future__ import annotations

import builtins
import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from sessionstore.backends.files import FILE_MODE, fsync_directory, open_regular, write_all
from sessionstore.errors import InvalidRecordError, StorageError
from sessionstore.models import Anchor, Erasure
from sessionstore.store import SessionStore
from sessionstore.timestamps import now_rfc3339
from sessionstore.wire import decode_anchor, encode

__all__ = ["anchor_session", "check_anchor", "read_anchors", "write_anchors"]


async def anchor_session(
    store: SessionStore, session_id: str, *, erasures: int, prefix: int | None = None
) -> tuple[Anchor, str | None]:
    """The session's anchor now, and the digest of its first ``prefix``
    entries (an older anchor's ``lines``; None when it holds fewer).

    Args:
        erasures: how many erasure records the store holds, read before
            the session.
        prefix: how many entries to give the digest of too.

    Raises:
        SessionNotFoundError, CorruptSessionError: as `SessionStore.raw_blocks`.
    """
    whole = hashlib.blake2b(digest_size=32)
    lines = 0  # lines read: the header, then the entries
    early: str | None = None
    async for block in store.raw_blocks(session_id):
        count = block.count(b"\n")
        if prefix is not None and early is None and lines + count > prefix:
            end = -1
            for _ in range(prefix + 1 - lines):  # the newline ending entry ``prefix``
                end = block.index(b"\n", end + 1)
            part = whole.copy()
            part.update(block[: end + 1])
            early = part.hexdigest()
        whole.update(block)
        lines += count
    anchor = Anchor(
        session=session_id,
        lines=max(lines - 1, 0),
        digest=whole.hexdigest(),
        erasures=erasures,
        at=now_rfc3339(),
    )
    return anchor, early


def check_anchor(
    old: Anchor, now: Anchor | None, early: str | None, erasures: Sequence[Erasure]
) -> tuple[str | None, str | None]:
    """What an older anchor says of the session now: a fault or a note.

    Args:
        old: the older anchor.
        now: the session's anchor now; None when the store no longer holds it.
        early: the digest of its first ``old.lines`` entries now, as
            `anchor_session` gives it.
        erasures: every erasure record the store holds, oldest first.

    Returns:
        ``(fault, note)``, either or both None.
    """
    session = old.session
    since = [
        record
        for record in erasures[old.erasures :]
        if record.kind == "session" and record.name == session
    ]
    if now is not None and early == old.digest:
        return None, None
    if since:
        erased = f"erased since it was anchored ({since[-1].at}, {since[-1].reason!r})"
        return None, f"session {session!r}: {erased}" + (
            "" if now is None else ", and created again"
        )
    if now is None:
        return (
            f"session {session!r}: anchored with {old.lines} entries, now gone, "
            "with no erasure recorded since",
            None,
        )
    if now.lines < old.lines:
        return (
            f"session {session!r}: anchored with {old.lines} entries, now holds "
            f"{now.lines}, with no erasure recorded since: entries were deleted",
            None,
        )
    return (
        f"session {session!r}: its first {old.lines} entries are not those anchored "
        f"at {old.at}: its history was rewritten",
        None,
    )


def read_anchors(path: str | os.PathLike[str]) -> builtins.list[Anchor]:
    """The anchors of a file `write_anchors` wrote; none when it does not exist.

    Raises:
        InvalidRecordError: a line is not an anchor, or names a session
            anchored on an earlier line (naming the file and line).
        StorageError: the file cannot be read, or is not a regular file.
    """
    where = Path(path)
    try:
        fd = open_regular(where, os.O_RDONLY)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"cannot read anchors from {where}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise StorageError(f"cannot read anchors from {where}: {exc.strerror or exc}") from exc
    anchors: dict[str, Anchor] = {}
    for number, line in enumerate(data.splitlines(), 1):
        try:
            anchor = decode_anchor(line)
        except InvalidRecordError as exc:
            raise InvalidRecordError(f"{where}, line {number}: {exc}") from exc
        if anchor.session in anchors:
            raise InvalidRecordError(
                f"{where}, line {number}: session {anchor.session!r} is anchored twice"
            )
        anchors[anchor.session] = anchor
    return list(anchors.values())


def write_anchors(path: str | os.PathLike[str], anchors: Iterable[Anchor]) -> None:
    """Replace the file at ``path`` with ``anchors``, one a line, durably:
    written beside it, synced, renamed over it (a crash leaves either, whole).

    Raises:
        StorageError: the file cannot be written.
    """
    where = Path(path)
    temporary = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    data = b"".join(encode(anchor).encode() + b"\n" for anchor in anchors)
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, where)
        fsync_directory(where.parent)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StorageError(f"cannot write anchors to {where}: {exc.strerror or exc}") from exc
