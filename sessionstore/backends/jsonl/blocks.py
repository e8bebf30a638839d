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

import asyncio
import os
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from sessionstore.backends.files import write_all
from sessionstore.backends.jsonl.context import line_number
from sessionstore.backends.jsonl.file import READ, open_locked, open_session, repair
from sessionstore.backends.jsonl.temporary import Temporary
from sessionstore.backends.records import imported_header
from sessionstore.errors import CorruptSessionError, InvalidRecordError, SessionConflictError
from sessionstore.wire import limits

__all__ = ["BlockWriter", "read_blocks"]

Run = Callable[[Callable[[], Any]], Awaitable[Any]]

_R = TypeVar("_R")


class _Held:
    """What a write holds: the temporary it writes, the session's file (its
    lock) when it extends one, and its call running in a thread."""

    def __init__(self) -> None:
        self.temporary: Temporary | None = None
        self.old = -1
        self.running: asyncio.Future[Any] | None = None
        self.keep: Callable[[Any], Temporary] | None = None

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

    def after(self, step: asyncio.Future[Any]) -> None:
        """A cancelled write's call ended: what it made kept, then all let go
        (on the loop: an unlink and two closes, no wait for I/O)."""
        if self.keep is not None and not step.cancelled() and step.exception() is None:
            self.keep(step.result())
        self.let_go()


async def read_blocks(
    session_id: str,
    path: Path,
    run: Run,
    size_of: Callable[[int], int],
    within: Path | None,
    close: Callable[[int], None] = os.close,
) -> AsyncIterator[bytes]:
    """The complete lines of the session file at ``path`` (through a link only
    to a file under ``within``), in blocks of about `READ` bytes;
    ``size_of(fd)`` gives their length (a repair, or none); ``close(fd)``
    lets go of the file, after the last call of ``run`` on it."""
    fd = await _opened(
        run(lambda: open_session(session_id, path, os.O_RDONLY, within=within)), close
    )
    try:
        size = await run(partial(size_of, fd))
        offset, rest = 0, b""
        while offset < size:
            chunk = rest + await run(partial(os.pread, fd, min(READ, size - offset), offset))
            at = offset - len(rest)  # where the chunk starts in the file
            offset += len(chunk) - len(rest)
            cut = chunk.rfind(b"\n") + 1
            block, rest = chunk[:cut], chunk[cut:]
            if len(rest) > limits.MAX_LINE:  # never joined whole: refused here
                size_of_line = f"a line of more than {len(rest)} bytes"
                reason = f"{size_of_line}, longer than the limit of {limits.MAX_LINE}"
                raise await _corrupt(session_id, path, run, fd, at + cut, reason)
            if not block.isascii():  # ASCII is UTF-8, and quicker to tell
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as exc:
                    start = block.rfind(b"\n", 0, exc.start) + 1
                    reason = f"invalid UTF-8 at byte {exc.start - start}"
                    raise await _corrupt(session_id, path, run, fd, at + start, reason) from None
            if block:
                yield block
    finally:
        close(fd)


async def _opened(opening: Awaitable[int], close: Callable[[int], None]) -> int:
    """The descriptor ``opening`` gives; cancelled meanwhile, the call goes
    on in its thread, and what it opens is closed once it ends."""
    call = asyncio.ensure_future(opening)
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        call.add_done_callback(partial(_close_opened, close))
        raise


def _close_opened(close: Callable[[int], None], call: asyncio.Future[int]) -> None:
    if not call.cancelled() and call.exception() is None:
        close(call.result())


async def _corrupt(
    session_id: str, path: Path, run: Run, fd: int, offset: int, reason: str
) -> CorruptSessionError:
    """The fault of the session file's line at ``offset``, numbered."""
    line = await run(partial(line_number, fd, offset))
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
        held = _Held()
        try:
            if after is None:
                create = partial(Temporary.create, self.path, "import")
                made = await self._step(held, create, held.made)
            else:
                made = await self._step(held, partial(self._copy, after), held.copied)
            count = await self._write_blocks(held, made.fd, blocks, header=after is None)
            await self._step(held, partial(self._publish, made, replace=after is not None))
            return count
        finally:
            if held.running is None:
                await self.run(held.let_go)
            else:  # cancelled (or its call failed): it lets go once the call ends,
                held.running.add_done_callback(held.after)  # keeping what it made

    async def _step(
        self, held: _Held, call: Callable[[], _R], keep: Callable[[_R], Temporary] | None = None
    ) -> Any:
        """``call()`` in a thread, what it made kept in ``held`` (``keep``);
        cancelled, it goes on there, and ``write`` lets go after it."""
        step = asyncio.ensure_future(self.run(call))
        held.running, held.keep = step, keep
        result = await asyncio.shield(step)  # cancelled: ``running`` stays
        held.running = None
        return result if keep is None else keep(result)

    async def _write_blocks(
        self, held: _Held, fd: int, blocks: AsyncIterable[bytes], *, header: bool
    ) -> int:
        lines = 0
        async for block in blocks:
            if not block:
                continue
            if not block.endswith(b"\n"):
                raise InvalidRecordError(f"session {self.session_id!r}: a block ends inside a line")
            if header and lines == 0:
                self._check_header(block[: block.index(b"\n")])
            await self._step(held, partial(write_all, fd, block))
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
