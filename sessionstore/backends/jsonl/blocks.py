"""A session file's bytes as blocks of whole lines, and blocks written in verbatim.

`read_blocks` streams the complete lines about a megabyte at a time, each
block checked to be UTF-8 with no line over the limit. `BlockWriter` writes
blocks another store gave (its `raw_blocks`: lines it checked when it
stored them) as they come, one ``write`` a block, decoding only the header:
a new session is published whole (`Temporary`), and more of one is written
aside, after a copy of the file, and renamed over it under the file's
lock, so that no reader, nor another name of the old file (a hard link),
ever sees a part of it.
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
from sessionstore.backends.jsonl.context import line_number
from sessionstore.backends.jsonl.file import READ, open_locked, open_session, repair
from sessionstore.backends.jsonl.temporary import Temporary
from sessionstore.backends.records import imported_header
from sessionstore.errors import CorruptSessionError, InvalidRecordError, SessionConflictError
from sessionstore.wire import limits

__all__ = ["BlockWriter", "read_blocks"]

Run = Callable[[Callable[[], Any]], Awaitable[Any]]


class _Held:
    """What a write holds: the temporary it writes, and the session's file
    (its lock) when it extends one; noted by the calls that make them, in
    their threads, so that a cancelled call's are let go too."""

    def __init__(self) -> None:
        self.temporary: Temporary | None = None
        self.old = -1

    def made(self, temporary: Temporary) -> Temporary:
        self.temporary = temporary
        return temporary

    def copied(self, copy: tuple[int, Temporary]) -> Temporary:
        self.old, self.temporary = copy
        return self.temporary

    def let_go(self) -> None:
        """The temporary removed, then the session's file closed (its lock let go)."""
        try:
            if self.temporary is not None:
                self.temporary.close()
        finally:
            if self.old >= 0:
                os.close(self.old)


async def read_blocks(
    session_id: str,
    path: Path,
    run: Run,
    size_of: Callable[[int], int],
    within: Path | None,
) -> AsyncIterator[bytes]:
    """The complete lines of the session file at ``path`` (through a link only
    to a file under ``within``), in blocks of about `READ` bytes;
    ``size_of(fd)`` gives their length (a repair, or none). The file is
    closed after the last call of ``run`` on it (in its thread when a
    cancellation left it running)."""
    holding = Holding(run)
    try:
        fd = await holding.open(partial(open_session, session_id, path, os.O_RDONLY, within=within))
        size = await holding.call(partial(size_of, fd))
        offset, rest = 0, b""
        while offset < size:
            read = partial(os.pread, fd, min(READ, size - offset), offset)
            chunk = rest + await holding.call(read)
            at = offset - len(rest)  # where the chunk starts in the file
            offset += len(chunk) - len(rest)
            cut = chunk.rfind(b"\n") + 1
            block, rest = chunk[:cut], chunk[cut:]
            if len(rest) > limits.MAX_LINE:  # never joined whole: refused here
                size_of_line = f"a line of more than {len(rest)} bytes"
                reason = f"{size_of_line}, longer than the limit of {limits.MAX_LINE}"
                raise await _corrupt(session_id, path, holding, fd, at + cut, reason)
            if not block.isascii():  # ASCII is UTF-8, and quicker to tell
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as exc:
                    start = block.rfind(b"\n", 0, exc.start) + 1
                    reason = f"invalid UTF-8 at byte {exc.start - start}"
                    error = await _corrupt(session_id, path, holding, fd, at + start, reason)
                    raise error from None
            if block:
                yield block
    finally:
        holding.close()


async def _corrupt(
    session_id: str, path: Path, holding: Holding, fd: int, offset: int, reason: str
) -> CorruptSessionError:
    """The fault of the session file's line at ``offset``, numbered."""
    line = await holding.call(partial(line_number, fd, offset))
    return CorruptSessionError(session_id, reason, path=str(path), line=line)


@dataclass(frozen=True)
class BlockWriter:
    """Writes blocks of a session's stored lines into its file at ``path``;
    ``full``: synced; ``run``: blocking work off the loop, OS errors naming
    the file."""

    session_id: str
    path: Path
    full: bool
    run: Run

    async def write(self, blocks: AsyncIterable[bytes], after: int | None) -> int:
        """Write the lines of ``blocks``: a whole session, its header first
        (``after`` None), or the lines after its ``after`` entries; how many
        entries were written."""
        held, holding = _Held(), Holding(self.run)
        try:
            if after is None:
                create = partial(Temporary.create, self.path, "import")
                made = await holding.call(lambda: held.made(create()))
            else:
                made = await holding.call(lambda: held.copied(self._copy(after)))
            count = await self._write_blocks(holding, made.fd, blocks, header=after is None)
            await holding.call(partial(self._publish, made, replace=after is not None))
            return count
        finally:
            # After the last call, in its thread if it was cancelled and runs
            # on (keeping what it made, noted in ``held`` there).
            await holding.end(held.let_go)

    async def _write_blocks(
        self, holding: Holding, fd: int, blocks: AsyncIterable[bytes], *, header: bool
    ) -> int:
        lines = 0
        async for block in blocks:
            if not block:
                continue
            if not block.endswith(b"\n"):
                raise InvalidRecordError(f"session {self.session_id!r}: a block ends inside a line")
            if header and lines == 0:
                self._check_header(block[: block.index(b"\n")])
            await holding.call(partial(write_all, fd, block))
            lines += block.count(b"\n")
        if header and lines == 0:
            raise InvalidRecordError(f"session {self.session_id!r}: no header line")
        return lines - 1 if header else lines

    def _check_header(self, line: bytes) -> None:
        meta = imported_header(line.decode("utf-8"))
        if meta.id != self.session_id:
            reason = f"header line names session {meta.id!r}, not {self.session_id!r}"
            raise InvalidRecordError(reason)

    def _copy(self, after: int) -> tuple[int, Temporary]:
        """Lock the session's file (cutting a crash's remnant), check that it
        holds ``after`` entries, and copy it into a temporary to go on."""
        fd = open_locked(self.session_id, self.path, os.O_RDWR)
        try:
            size = repair(self.session_id, self.path, fd, full=self.full)
            temporary = Temporary.create(self.path, "import")
            try:
                lines, offset = 0, 0
                while offset < size and (chunk := os.pread(fd, min(READ, size - offset), offset)):
                    write_all(temporary.fd, chunk)
                    lines += chunk.count(b"\n")
                    offset += len(chunk)
                if lines - 1 != after:
                    reason = f"holds {lines - 1} entries, not {after}"
                    raise SessionConflictError(self.session_id, reason)
            except BaseException:
                temporary.close()
                raise
        except BaseException:
            os.close(fd)
            raise
        return fd, temporary

    def _publish(self, temporary: Temporary, *, replace: bool) -> None:
        temporary.publish(self.session_id, full=self.full, replace=replace)
