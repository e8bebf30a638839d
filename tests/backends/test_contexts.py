"""A store's cache of the contexts it built stays within its bounds."""

from __future__ import annotations

import pytest

from sessionstore import Message
from sessionstore.backends import contexts
from sessionstore.backends.contexts import BuiltContext, ContextCache


def built(size: int, extent: int = 1) -> BuiltContext[int]:
    messages = tuple(Message.user(f"m{n}") for n in range(size))
    ids = tuple(f"e{n}" for n in range(size))
    return BuiltContext(
        stamp=1,
        extent=extent,
        messages=messages,
        ids=ids,
        summarized=False,
        waiting_for=None,
        last=ids[-1] if ids else "",
    )


def test_the_cache_keeps_the_latest_contexts_within_both_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(contexts, "CACHED_SESSIONS", 2)
    monkeypatch.setattr(contexts, "CACHED_MESSAGES", 5)
    cache: ContextCache[int] = ContextCache()
    for name, size in [("a", 2), ("b", 2), ("c", 2), ("d", 6), ("e", 1)]:
        cache.put(name, built(size))
        held = cache.held()
        assert len(held) <= 2
        assert cache.messages == sum(len(b.messages) for b in held.values()) <= 5
    assert list(cache.held()) == ["c", "e"]  # "d" alone is over the bound: never cached


def test_a_context_built_less_far_does_not_replace_one_built_further() -> None:
    cache: ContextCache[int] = ContextCache()
    cache.put("s", built(3, extent=9))
    cache.put("s", built(2, extent=4))
    held = cache.get("s")
    assert held is not None
    assert held.extent == 9


def test_clear_forgets_everything() -> None:
    cache: ContextCache[int] = ContextCache()
    cache.put("s", built(3))
    cache.clear()
    assert cache.get("s") is None
    assert cache.messages == 0
