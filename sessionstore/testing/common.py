"""What the contract suites share: how they reach a backend, and records to store."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

from sessionstore import (
    CompactionEntry,
    Message,
    MessageEntry,
    SessionEntry,
    SessionNotFoundError,
    build_context,
    encode,
)
from sessionstore.store import Capability, SessionJournal, SessionStore, SessionSummary

_F = TypeVar("_F", bound=Callable[..., Any])

INVALID_IDS = ["../x", "a/b", "a\\b", ".hidden", "", "x" * 201, "tab\there", "nul\x00", "del\x7f"]
UNUSUAL_VALID_IDS = ["tenant:42", "Ünïcode", "x" * 200, "é" * 100, "with space", "a.b"]


@dataclass
class JournalBackend:
    """How the journal contract suite reaches a backend.

    Attributes:
        open: makes a new journal object; every call must reach the same
            journal, so that a second object reads what the first wrote.
    """

    open: Callable[[], Awaitable[SessionJournal]]


@dataclass
class Backend:
    """How the contract suite reaches a backend.

    Attributes:
        open: makes a new store object; every call must reach the same
            storage, so that a second object sees what the first stored.
        persistent: whether a store opened later sees what an earlier,
            closed one stored (False for in-memory backends, whose storage
            is the object itself: ``open`` may then return one object).
        damage: damages a session's stored data behind the store's back,
            where `SessionStore.summaries` reads it (a line of its file, its
            header row), so that it no longer decodes; None for a backend
            that cannot hold such data (in memory, nothing undecodable is
            ever kept).
    """

    open: Callable[[], Awaitable[SessionStore]]
    persistent: bool = True
    damage: Callable[[str], Awaitable[None]] | None = None


def examples(count: int) -> Callable[[_F], _F]:
    """Hypothesis settings for a model test of ``count`` examples over a store."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def message(entry_id: str, text: str, timestamp: str = "2026-07-19T00:00:00+00:00") -> MessageEntry:
    """A message entry with a fixed id, for readable assertions."""
    return MessageEntry(id=entry_id, timestamp=timestamp, message=Message.user(text))


def compaction(entry_id: str, summary: str, first_kept_id: str) -> CompactionEntry:
    """A compaction entry with a fixed id."""
    return CompactionEntry(
        id=entry_id,
        timestamp="2026-07-19T00:00:00+00:00",
        summary=summary,
        first_kept_id=first_kept_id,
        tokens_before=1000,
    )


def lines(entries: list[SessionEntry]) -> list[str]:
    """Entries as their wire lines: equality down to field order and extras."""
    return [encode(entry) for entry in entries]


async def stream(texts: Iterable[str]) -> AsyncIterator[str]:
    """Lines as the async iterable `SessionStore.import_session` takes."""
    for text in texts:
        yield text


async def raw(store: SessionStore, session_id: str) -> list[str]:
    """A session's stored lines, as `SessionStore.raw_lines` gives them."""
    return [line async for line in store.raw_lines(session_id)]


async def drain(items: AsyncIterator[object]) -> None:
    """Read a stream to its end (or its error)."""
    async for _ in items:
        pass


async def blocks(store: SessionStore, session_id: str) -> bytes:
    """A session's stored bytes, as `SessionStore.raw_blocks` gives them."""
    return b"".join([block async for block in store.raw_blocks(session_id)])


def digest(data: bytes) -> str:
    """The digest an erasure records of ``data``."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


async def reads_as(store: SessionStore, session_id: str, entries: list[SessionEntry]) -> None:
    """``session_id`` reads back exactly as a session holding ``entries``
    would, through every read of the contract."""
    expected = lines(entries)
    assert lines(await store.load(session_id)) == expected
    assert [encode(entry) async for entry in store.iter_entries(session_id)] == expected
    stored = await raw(store, session_id)
    assert stored[1:] == expected
    assert await store.load_context(session_id) == build_context(entries)
    assert await blocks(store, session_id) == "".join(line + "\n" for line in stored).encode()


async def gone(store: SessionStore, session_id: str) -> None:
    """Every way to reach ``session_id`` says it is not found."""
    with pytest.raises(SessionNotFoundError):
        await store.load(session_id)
    with pytest.raises(SessionNotFoundError):
        await store.load_context(session_id)
    with pytest.raises(SessionNotFoundError):
        await store.append(session_id, message("late", "x"))
    with pytest.raises(SessionNotFoundError):
        await raw(store, session_id)
    assert session_id not in [meta.id for meta in await store.list()]
    if Capability.SUMMARIES in store.capabilities:
        assert session_id not in [s.meta.id for s in await store.summaries()]


def glance(summary: SessionSummary) -> tuple[object, ...]:
    """What a summary says of its session's contents."""
    return (summary.meta, summary.entries, summary.last_timestamp, summary.compacted, summary.fault)


def imported_header(session_id: str) -> str:
    r"""A header line written elsewhere: spaced, keys out of order, an unknown
    field, a trailing ``\r``; ``session_id`` is spelled as is."""
    return (
        '{ "created_at" : "2026-01-01T00:00:00Z" , "id" : "'
        + session_id
        + '" , "future_field" : {"nested": [1, 2.50, "x"]} }\r'
    )


IMPORTED_LINES = [
    # The id "k" spelled with escapes, keys out of order, unknown fields, a \r.
    '{"message": {"content": "first k", "role": "user", "extra": null}, "timestamp":'
    ' "2026-01-01T00:00:01+02:00", "type": "message", "id": "\\u006b", "unknown": [true]}\r',
    '{"id":"m2","type":"message","timestamp":"t2","message":{"role":"assistant",'
    '"content":"\\u00e9\\u0041 \u00e9 \\ud83d\\ude00"},"parent_id":null}',
    '{"type":"message","id":"k","timestamp":"t3","message":{"role":"user",'
    '"content":[{"type":"text","text":"second k"}],"z":1}}',
    '{ "type" : "compaction" , "first_kept_id" : "k", "summary":"s", "id":"c1",'
    ' "timestamp":"t4", "tokens_before":null }',
    # Written by a client that stored a message still streaming.
    '{"type":"message","id":"m5","timestamp":"t5","message":{"role":"assistant",'
    '"content":"par","streaming":true}}',
]
"""Entry lines written elsewhere, none in canonical form. Their context starts
at the first message with id ``k``: the one whose id is spelled with escapes."""
