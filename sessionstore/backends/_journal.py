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


def raw_lines(lines: Iterable[bytes]) -> list[bytes]:
    """Verbatim lines, refused when one would stand on more than one line."""
    checked = [bytes(line) for line in lines]
    for line in checked:
        if b"\n" in line:
            raise InvalidRecordError("a journal line cannot contain a newline")
    return checked


def file_bytes(lines: Iterable[bytes]) -> bytes:
    """The bytes of a journal file holding these complete lines."""
    return b"".join(line + b"\n" for line in lines)


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

    async def read_bytes(self) -> bytes:
        raise NotImplementedError

    async def clear(self) -> None:
        raise NotImplementedError

    async def append_raw(self, *lines: bytes) -> None:
        raise NotImplementedError

    async def read(self) -> Journal:
        """The journal as it stands; see `SessionJournal.read`."""
        return Journal.parse(await self.read_bytes())

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
