"""Reading the session journal: `Journal.parse` (SPEC section 5, docs/journal.md).

Reading never fails: a line that does not parse (torn by a crash, invalid
UTF-8, a newer format) is skipped and its 1-based number kept in
`Journal.skipped`, since the journal must not stop an agent from running.
It streams, holding one line at a time; a line longer than `MAX_LINE` is
skipped without being held whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sessionstore.errors import InvalidRecordError
from sessionstore.models import CommentWrite, PostWrite, SessionHeader, Written
from sessionstore.wire import decode_journal_line

__all__ = ["MAX_LINE", "Journal", "JournalSession"]

# The bytes Rust's u8::is_ascii_whitespace accepts; \x0b is not among them.
_BLANK = b" \t\n\x0c\r"

MAX_LINE = 1 << 20
"""Bytes of the longest journal line read (one is about a hundred); a longer
one is skipped unread."""

READ = 1 << 20
"""Bytes per read when parsing a file."""


@runtime_checkable
class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


Source = bytes | bytearray | memoryview | _Readable | Iterable[bytes | bytearray | memoryview]
"""What `Journal.parse` reads: the journal's bytes, a binary file, or chunks."""


def _chunks(data: Source) -> Iterator[bytes | bytearray]:
    """The data as chunks that can be searched (bytes or bytearray)."""
    if isinstance(data, bytes | bytearray):
        yield data
    elif isinstance(data, memoryview):
        yield data.tobytes()
    elif isinstance(data, _Readable):
        while chunk := data.read(READ):
            yield chunk
    else:
        for piece in data:
            yield piece if isinstance(piece, bytes | bytearray) else bytes(piece)


def _pieces(data: Source) -> Iterator[bytes | None]:
    """The pieces between newlines, one at a time, as ``bytes.split`` would
    give them; None for a piece longer than `MAX_LINE` (and not blank),
    whose bytes are dropped as they come rather than held."""
    pending = bytearray()  # the current piece so far, while it fits
    # None while the current piece fits; once it outgrew MAX_LINE (its bytes
    # are then dropped), whether all it dropped was blank.
    blank: bool | None = None
    for chunk in _chunks(data):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            if blank is None and len(pending) + stop - start > MAX_LINE:
                blank = not pending.strip(_BLANK)
                pending.clear()
            if blank is not None:
                blank = blank and not chunk[start:stop].strip(_BLANK)
            elif end >= 0 and not pending:
                yield bytes(chunk[start:end])  # the common case: a line within a chunk
                start = end + 1
                continue
            else:
                pending += chunk[start:stop]
            if end < 0:
                break
            yield _piece(pending, blank)
            pending.clear()
            blank = None
            start = end + 1
    yield _piece(pending, blank)


def _piece(pending: bytearray, blank: bool | None) -> bytes | None:
    if blank is None:
        return bytes(pending)
    return b"" if blank else None


@dataclass
class JournalSession:
    """One session's part of a journal.

    Attributes:
        header: the line that opened the session; None when its writes came
            before any header that parsed (a header torn or unreadable).
        writes: the writes it recorded, in order.
    """

    header: SessionHeader | None = None
    writes: list[Written] = field(default_factory=list)


@dataclass
class Journal:
    """A journal as read back: its sessions in order, and the skipped lines.

    Attributes:
        sessions: the sessions, in the order they began.
        skipped: 1-based numbers of the lines that did not parse.
    """

    sessions: list[JournalSession] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    @classmethod
    def parse(cls, data: Source) -> Journal:
        """Read a journal; never raises on its content.

        Args:
            data: the journal's bytes, a binary file (read in chunks from
                where it stands), or an iterable of byte chunks.

        The data is split on ``\\n``. A blank piece (space, ``\\t``, ``\\n``,
        ``\\x0c``, ``\\r``) is ignored; any other that is not a journal line
        is skipped and its number recorded. A ``session`` line opens a
        session; a write belongs to the last opened, or to a header-less one.
        """
        journal = cls()
        for number, piece in enumerate(_pieces(data), start=1):
            if piece is None:
                journal.skipped.append(number)
                continue
            if not piece.strip(_BLANK):
                continue
            try:
                line = decode_journal_line(piece)
            except InvalidRecordError:
                journal.skipped.append(number)
                continue
            if isinstance(line, SessionHeader):
                journal.sessions.append(JournalSession(header=line))
            else:
                journal._push(line)
        return journal

    def _push(self, write: PostWrite | CommentWrite) -> None:
        if not self.sessions:
            self.sessions.append(JournalSession())
        self.sessions[-1].writes.append(write)

    def interrupted(self) -> Iterator[JournalSession]:
        """The sessions that recorded at least one write: those to report."""
        return (session for session in self.sessions if session.writes)

    def writes(self) -> int:
        """How many writes were recorded, over every session."""
        return sum(len(session.writes) for session in self.sessions)
