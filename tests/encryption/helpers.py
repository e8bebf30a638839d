"""What the tests of encryption at rest share: a session whose every sealed
field holds a marker word, and where that word can be found."""

from __future__ import annotations

from pathlib import Path

from sessionstore import ArchiveError, Message, MessageEntry, SessionMeta, SessionStore
from sessionstore.archive import ArchiveIssue, ArchiveReport
from sessionstore.journal import Journal
from sessionstore.models import CompactionEntry, SessionHeader
from sessionstore.timestamps import Timestamp


def marked(marker: str) -> tuple[SessionMeta, list[MessageEntry | CompactionEntry]]:
    """A session whose every sealed field holds ``marker``."""
    meta = SessionMeta(
        id="s1",
        title=f"title {marker}",
        owner=f"owner{marker}",
        tags=(f"tag{marker}",),
        metadata={"note": f"meta {marker}"},
    )
    function = {"name": "lookup", "arguments": f'{{"query": "args {marker}"}}'}
    call = Message(
        role="assistant",
        content="",
        tool_calls=[{"id": "call-1", "type": "function", "function": function}],
    )
    result = Message(role="tool", content=f"result {marker}", tool_call_id="call-1")
    first = MessageEntry.new(Message.user(f"hello {marker} and more"))
    entries: list[MessageEntry | CompactionEntry] = [
        first,
        MessageEntry.new(call),
        MessageEntry.new(result),
        CompactionEntry.new(f"summary {marker}", first.id),
    ]
    return meta, entries


async def fill(store: SessionStore, marker: str) -> None:
    """Session ``s1`` of `marked`, retitled, and journal ``agent`` begun, all holding ``marker``."""
    meta, entries = marked(marker)
    await store.create(meta)
    await store.append_many("s1", entries)
    await store.set_title("s1", f"later {marker}")
    journal = store.journal("agent")
    await journal.begin(SessionHeader(started_at=Timestamp.now(), model=marker), Journal())


def files_holding(root: Path, marker: str) -> list[str]:
    """The files below ``root`` holding ``marker``, as bytes anywhere in them."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and marker.encode() in path.read_bytes():
            found.append(str(path))
    return found


def refused(error: ArchiveError) -> list[ArchiveIssue]:
    """The files an export or import refused."""
    assert isinstance(error.report, ArchiveReport)
    return error.report.refused
