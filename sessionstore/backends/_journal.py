"""What every journal backend shares: line checks and the derived methods."""

from __future__ import annotations

from collections.abc import Iterable

from sessionstore.errors import InvalidRecordError
from sessionstore.journal import Journal
from sessionstore.models import CommentWrite, PostWrite, SessionHeader
from sessionstore.store import JournalRecord
from sessionstore.wire import encode


def journal_line(line: JournalRecord) -> bytes:
    """The stored bytes of a journal line (no newline), after checking its type."""
    if not isinstance(line, SessionHeader | PostWrite | CommentWrite):
        raise InvalidRecordError(f"expected a journal line, got {type(line).__name__}")
    return encode(line).encode()


def raw_line(line: bytes) -> bytes:
    """A verbatim line, refused when it would stand on more than one line."""
    data = bytes(line)
    if b"\n" in data:
        raise InvalidRecordError("a journal line cannot contain a newline")
    return data


def parse_lines(lines: Iterable[bytes]) -> Journal:
    """The journal that these complete lines make, as a file would hold them."""
    return Journal.parse(b"".join(line + b"\n" for line in lines))


def lines_since_clear(rows: Iterable[bytes | None]) -> list[bytes]:
    """The lines after the last clear marker (None) of a journal's history."""
    current: list[bytes] = []
    for row in rows:
        if row is None:
            current.clear()
        else:
            current.append(row)
    return current


class JournalBase:
    """`begin` and `append` in terms of `clear` and `append_raw`."""

    async def read(self) -> Journal:
        raise NotImplementedError

    async def clear(self) -> None:
        raise NotImplementedError

    async def append_raw(self, line: bytes) -> None:
        raise NotImplementedError

    async def begin(self, header: SessionHeader, leftover: Journal) -> None:
        """Start a session; see `SessionJournal.begin`."""
        if not isinstance(header, SessionHeader):
            raise InvalidRecordError(f"expected a SessionHeader, got {type(header).__name__}")
        if leftover.writes() == 0:
            await self.clear()
        await self.append(header)

    async def append(self, line: JournalRecord) -> None:
        """Append one line durably; see `SessionJournal.append`."""
        await self.append_raw(journal_line(line))
