"""A session file's complete lines, read in blocks of whole lines (`file_blocks`).

What an archive copies and `raw_lines` splits: each block checked as it
is read (no line longer than the limit, valid UTF-8), a fault refused with
the number of the line it is in.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from sessionstore.backends.jsonl.context import line_number
from sessionstore.backends.jsonl.file import READ, complete_size, open_session
from sessionstore.errors import CorruptSessionError
from sessionstore.wire import limits

__all__ = ["file_blocks"]

Run = Callable[[Callable[[], Any]], Awaitable[Any]]


async def file_blocks(session_id: str, path: Path, run: Run, *, full: bool) -> AsyncIterator[bytes]:
    """The blocks of whole lines of a session's file, about `READ` bytes
    each; ``run``: blocking work off the loop, OS errors naming the file."""

    def opened() -> tuple[int, int]:  # one hop: the file and how much of it is whole
        fd = open_session(session_id, path, os.O_RDONLY)
        try:
            return fd, complete_size(session_id, path, fd, full=full)
        except BaseException:
            os.close(fd)
            raise

    fd, size = await run(opened)

    async def corrupt(offset: int, reason: str) -> CorruptSessionError:
        line = await run(partial(line_number, fd, offset))
        return CorruptSessionError(session_id, reason, path=str(path), line=line)

    try:
        offset, rest = 0, b""
        while offset < size:
            chunk = rest + await run(partial(os.pread, fd, min(READ, size - offset), offset))
            at = offset - len(rest)  # where the chunk starts in the file
            offset += len(chunk) - len(rest)
            cut = chunk.rfind(b"\n") + 1
            block, rest = chunk[:cut], chunk[cut:]
            if len(rest) > limits.MAX_LINE:  # never joined whole: refused here
                size_of = f"a line of more than {len(rest)} bytes"
                reason = f"{size_of}, longer than the limit of {limits.MAX_LINE}"
                raise await corrupt(at + cut, reason)
            if not block.isascii():  # ASCII is UTF-8, and quicker to tell
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as exc:
                    start = block.rfind(b"\n", 0, exc.start) + 1
                    reason = f"invalid UTF-8 at byte {exc.start - start}"
                    raise await corrupt(at + start, reason) from None
            if block:
                yield block
    finally:
        os.close(fd)
