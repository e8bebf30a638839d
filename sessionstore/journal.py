"""Reading the session journal: `Journal.parse` (SPEC section 5).

An agent's state is saved once, when its session ends. The journal is the
record of what a session wrote while it ran, so that a session stopped
before its save (a ``SIGTERM`` at shutdown, a power cut) is not forgotten:
a `SessionHeader` line when the session starts, then one line per write.

Reading never fails. A line that does not parse (torn by a crash, invalid
UTF-8, written by a newer format) is skipped and its 1-based number kept in
`Journal.skipped`; the journal is a courtesy to the agent and must not stop
it from running.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sessionstore.errors import InvalidRecordError
from sessionstore.models import CommentWrite, PostWrite, SessionHeader, Written
from sessionstore.wire import decode_journal_line

__all__ = ["Journal", "JournalSession"]

# The bytes Rust's u8::is_ascii_whitespace accepts; \x0b is not among them.
_BLANK = b" \t\n\x0c\r"


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
    def parse(cls, data: bytes | bytearray | memoryview) -> Journal:
        """Read a journal from its bytes; never raises.

        The data is split on ``\\n``. A piece made only of space, ``\\t``,
        ``\\n``, ``\\x0c`` and ``\\r`` is ignored; any other piece that is not a
        journal line is skipped and its number recorded. A ``session`` line
        opens a session; a write belongs to the session opened last, or to a
        header-less session when none was opened yet.
        """
        journal = cls()
        for number, piece in enumerate(bytes(data).split(b"\n"), start=1):
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
