"""Importing a session's lines into a JSONL store: a new session, or more of one.

Each line is checked as it comes. A new session is written as a block
import's is (`BlockWriter`: aside, then published whole); more lines go
under the session's lock once its header and entry count are as the caller
expects, and are cut back off the file if anything fails.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sessionstore.backends.files import write_all
from sessionstore.backends.holding import Holding
from sessionstore.backends.jsonl.blocks import BlockWriter
from sessionstore.backends.jsonl.file import READ, open_locked, repair, stamp
from sessionstore.backends.records import imported_entry
from sessionstore.errors import SessionConflictError

__all__ = ["Importer"]


@dataclass(frozen=True)
class Importer:
    """Writes imported lines of one session into its ``path``; ``full``: writes
    synced, ``run``: blocking work off the loop, OS errors naming the file."""

    session_id: str
    path: Path
    full: bool
    run: Callable[[Callable[[], Any]], Awaitable[Any]]

    async def new(self, header: str, entries: AsyncIterable[str]) -> int:
        """Write a new session of these lines; how many entries it holds."""
        blocks = _checked(self.session_id, entries, 0, (header + "\n").encode())
        writer = BlockWriter(self.session_id, self.path, self.full, self.run)
        return await writer.write(blocks, None)

    async def more(self, header: str, entries: AsyncIterable[str], after: int) -> int:
        """Write these lines after the ``after`` entries of the session, whose
        header line is ``header``; how many entries they are."""
        session_id, holding, file = self.session_id, Holding(self.run), _Appended()

        def open_checked() -> int:
            fd = open_locked(session_id, self.path, os.O_RDWR | os.O_APPEND)
            try:  # the lock is held until the file is closed
                repair(session_id, self.path, fd, full=self.full)
                _expect(session_id, fd, header, after)
                size = os.fstat(fd).st_size
            except BaseException:
                os.close(fd)
                raise
            file.fd, file.size = fd, size  # in its thread: closed after, even if cancelled
            return fd

        try:
            fd = await holding.call(open_checked)
            count = 0
            async for block in _checked(session_id, entries, after):
                await holding.call(partial(write_all, fd, block))
                count += block.count(b"\n")
            if count:
                await holding.call(partial(stamp, fd))
            if self.full:
                await holding.call(partial(os.fdatasync, fd))
            file.whole = True
        finally:
            # After the last call, in its thread if it was cancelled and runs
            # on: a cut beside a write under way could come before it.
            await holding.end(file.let_go)
        return count


class _Appended:
    """The session file an import appends to, and its size before."""

    def __init__(self) -> None:
        self.fd, self.size, self.whole = -1, 0, False

    def let_go(self) -> None:
        """Cut back what was written unless all was (all or nothing), then
        closed (its lock let go)."""
        if self.fd < 0:
            return
        try:
            if not self.whole:
                os.ftruncate(self.fd, self.size)
        finally:
            os.close(self.fd)


async def _checked(
    session_id: str, entries: AsyncIterable[str], after: int, first: bytes = b""
) -> AsyncIterator[bytes]:
    """The entry lines after ``after`` entries, each checked (or refused), in
    blocks of about `READ` bytes, ``first`` (a header line) before them."""
    buffer, pending, count = [first], len(first), 0
    async for line in entries:
        imported_entry(session_id, after + count + 1, line)
        encoded = (line + "\n").encode()
        buffer.append(encoded)
        pending += len(encoded)
        count += 1
        if pending >= READ:
            yield b"".join(buffer)
            buffer, pending = [], 0
    if pending:
        yield b"".join(buffer)


def _expect(session_id: str, fd: int, header: str, count: int) -> None:
    """Check a locked session file's header line and number of entries."""
    first = (header + "\n").encode()
    if os.pread(fd, len(first), 0) != first:
        raise SessionConflictError(session_id, "the stored header line differs")
    lines, offset = 0, 0
    while chunk := os.pread(fd, READ, offset):
        lines += chunk.count(b"\n")
        offset += len(chunk)
    if lines - 1 != count:
        raise SessionConflictError(session_id, f"holds {lines - 1} entries, not {count}")
