"""The demo (`sessionstore demo`): a realistic agent conversation played into a
store, its context, a journal left with an interrupted session, and an
archive round trip that comes back byte for byte.

The system prompt is kept in code and sent before the stored context, as
agents keep theirs: a compaction's context begins with its summary, so a
stored one would be cut (docs/stores.md, "Compaction and the system prompt").
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from sessionstore.archive import export_archive, import_archive
from sessionstore.backends import open_store
from sessionstore.journal import Journal
from sessionstore.models import (
    CommentWrite,
    CompactionEntry,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
)
from sessionstore.store import SessionStore
from sessionstore.timestamps import Timestamp

__all__ = ["DemoResult", "play_demo"]

AGENT = "demo-agent"
SYSTEM = Message.system("You are a concise travel assistant.")
"""The demo agent's system prompt: in code, sent first on every model call."""


@dataclass
class DemoResult:
    """What the demo did, for the command line to show."""

    session_id: str
    entries: int
    context: list[Message]
    """What the model is sent: `SYSTEM`, then the session's context."""
    journal: Journal
    archive_files: int
    archive_bytes: int
    identical: bool


def _conversation() -> list[MessageEntry | CompactionEntry]:
    function = {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}
    call = {"id": "call_1", "type": "function", "function": function}
    early = [
        Message.user("What's the weather in Lisbon tomorrow?"),
        Message(role="assistant", content="", tool_calls=[call]),
        Message(role="tool", content='{"high_c": 24, "sky": "sunny"}', tool_call_id="call_1"),
        Message.assistant("Sunny, with a high of 24 °C."),
    ]
    entries: list[MessageEntry | CompactionEntry] = [MessageEntry.new(m) for m in early]
    follow_up = MessageEntry.new(Message.user("Great. What should I pack?"))
    entries += [
        follow_up,
        MessageEntry.new(Message.assistant("Light clothes, sunscreen and a light jacket.")),
        CompactionEntry.new(
            "The user asked about Lisbon's weather tomorrow (sunny, 24 °C).",
            first_kept_id=follow_up.id,
            tokens_before=412,
        ),
        MessageEntry.new(Message.user("Any museum tips?")),
        MessageEntry.new(
            Message(
                role="assistant",
                content=[
                    {"type": "text", "text": "Try the Gulbenkian "},
                    {"type": "text", "text": "and the tile museum."},
                ],
            )
        ),
    ]
    return entries


async def _journal_with_an_interruption(store: SessionStore) -> Journal:
    journal = store.journal(AGENT)
    # A session that wrote, then was stopped before its state was saved...
    await journal.begin(SessionHeader(started_at=Timestamp.now(), model="demo-model"), Journal())
    post = uuid.uuid4()
    await journal.append(PostWrite(at=Timestamp.now(), id=post))
    # ...so the next start finds it, reports it, and keeps it.
    leftover = await journal.read()
    await journal.begin(SessionHeader(started_at=Timestamp.now(), model="demo-model"), leftover)
    await journal.append(CommentWrite(at=Timestamp.now(), id=uuid.uuid4(), on=post))
    return await journal.read()


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


async def play_demo(store: SessionStore) -> DemoResult:
    """Play the demo conversation into ``store`` and round-trip its archive."""
    meta = SessionMeta.new()
    await store.create(meta)
    entries = _conversation()
    for entry in entries:
        await store.append(meta.id, entry)
    context = [SYSTEM, *await store.load_context(meta.id)]
    journal = await _journal_with_an_interruption(store)
    with tempfile.TemporaryDirectory(prefix="sessionstore-demo-") as work:
        first, second = Path(work) / "first", Path(work) / "second"
        await export_archive(store, first, sessions=[meta.id], journals=[AGENT])
        async with open_store("memory://") as scratch:
            await import_archive(scratch, first)
            await export_archive(scratch, second)
        one, two = _tree(first), _tree(second)
    return DemoResult(
        session_id=meta.id,
        entries=len(entries),
        context=context,
        journal=journal,
        archive_files=len(one),
        archive_bytes=sum(len(data) for data in one.values()),
        identical=one == two,
    )
