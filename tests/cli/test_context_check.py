"""``show --context --check`` names orphaned tool exchanges; ``verify`` notes,
without failing, a compaction that keeps from no message (the reference's rule)."""

import asyncio
from pathlib import Path

import pytest

from sessionstore import CompactionEntry, Message, MessageEntry, SessionMeta, open_store
from sessionstore.testing.contract import message
from tests.cli.helpers import run

CALL = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def store_with(tmp_path: Path, entries: list[MessageEntry | CompactionEntry]) -> str:
    target = str(tmp_path / "sessions.db")

    async def fill() -> None:
        async with await open_store(target) as store:
            await store.create(SessionMeta(id="s"))
            await store.append_many("s", entries)

    asyncio.run(fill())
    return target


def tool_entry(entry_id: str, message: Message) -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp="t", message=message)


def test_an_interrupted_call_is_named_and_the_exit_status_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = store_with(
        tmp_path,
        [
            message("u1", "weather?"),
            tool_entry("a1", Message(role="assistant", content="", tool_calls=[CALL])),
        ],
    )
    status, out, err = run(capsys, "--db", db, "show", "s", "--context", "--check", "openai")
    assert status == 1
    assert out.splitlines() == ["user: weather?", "tool call: f({})"]  # the context, as usual
    assert "orphan: message 1: call 't1' got no result" in err
    assert "1 orphan" in err


def test_a_sound_context_passes_and_check_needs_context(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = store_with(
        tmp_path,
        [
            tool_entry("a1", Message(role="assistant", content="", tool_calls=[CALL])),
            tool_entry("r1", Message(role="tool", content="sunny", tool_call_id="t1")),
        ],
    )
    for dialect in ("openai", "anthropic", "openai-agents"):
        status, _, err = run(capsys, "--db", db, "show", "s", "--context", "--check", dialect)
        assert (status, err) == (0, "")
    status, _, err = run(capsys, "--db", db, "show", "s", "--check", "openai")
    assert status == 1
    assert "give --context too" in err


def test_verify_notes_a_compaction_keeping_from_no_message_and_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    marker = CompactionEntry(id="c1", timestamp="t", summary="s", first_kept_id="gone")
    db = store_with(tmp_path, [message("e1", "a"), marker, message("e2", "b")])
    status, out, err = run(capsys, "--db", db, "verify")
    assert status == 0
    assert out == "ok: 1 session, 3 entries checked (1 note)\n"
    assert err.startswith("note: session 's': compaction 'c1' keeps from 'gone'")
