"""The messages the benchmark writes, in one place: every part, and every
peer, stores the same texts, so their figures compare."""

from __future__ import annotations

from collections.abc import Iterator

from sessionstore import Message, MessageEntry

TEXT = "A realistic message of a few dozen words, as agents write them. " * 4


def text(n: int) -> str:
    """The text of message ``n``: what a peer stores, and `entry` wraps."""
    return f"{TEXT}{n}"


def entry(n: int) -> MessageEntry:
    """Message ``n`` as sessionstore's entry: a user message, id ``e<n>``."""
    message = Message.user(text(n))
    return MessageEntry(id=f"e{n}", timestamp="2026-11-30T00:00:00+00:00", message=message)


def batches(count: int, size: int = 5000) -> Iterator[list[MessageEntry]]:
    """Messages 0 to ``count`` - 1, ``size`` at a time."""
    for start in range(0, count, size):
        yield [entry(n) for n in range(start, min(count, start + size))]
