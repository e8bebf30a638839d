"""The context contract as tests: entry ids, repairs and compaction (part of
`SessionStoreContract`)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import (
    CompactionEntry,
    ConfigurationError,
    Message,
    MessageEntry,
    SessionEntry,
    SessionMeta,
    build_context,
    check_pairing,
)
from sessionstore.context import (
    PairingDialect,
    context_entries,
    context_message,
    summary_message,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import compaction, examples, message

__all__ = ["ContextContract", "reference_ids"]

SHAPES: list[PairingDialect] = ["openai", "anthropic"]


def reference_ids(entries: Sequence[SessionEntry]) -> list[tuple[str, Message]]:
    """The context of ``entries`` by its one definition (`context_entries`),
    each message with its entry's id: the oracle of
    `SessionStore.load_context_with_ids`."""
    return [(entry.id, context_message(entry)) for entry in context_entries(entries)[0]]


# ------------------------------------------------------------- tool exchanges


def calls(shape: PairingDialect, call_ids: Sequence[str], text: str = "") -> Message:
    """An assistant message making parallel tool calls, in ``shape``."""
    if shape == "openai":
        made = [
            {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for c in call_ids
        ]
        return Message(role="assistant", content=text, tool_calls=made)
    blocks = [{"type": "text", "text": text}] if text else []
    uses = [{"type": "tool_use", "id": c, "name": "f", "input": {}} for c in call_ids]
    return Message(role="assistant", content=blocks + uses)


def results(shape: PairingDialect, call_ids: Sequence[str]) -> list[Message]:
    """The messages answering ``call_ids``: a ``tool`` message each (OpenAI),
    or one user message of ``tool_result`` blocks (Anthropic)."""
    if shape == "openai":
        return [Message(role="tool", content=f"got {c}", tool_call_id=c) for c in call_ids]
    blocks = [{"type": "tool_result", "tool_use_id": c, "content": f"got {c}"} for c in call_ids]
    return [Message(role="user", content=blocks)] if blocks else []


def turn(
    shape: PairingDialect, name: str, width: int, *, crash: bool = False
) -> list[MessageEntry]:
    """A question, ``width`` parallel calls and their results (in reverse
    order), then an answer; with ``crash``, it stops after half the results."""
    call_ids = [f"{name}-call{n}" for n in range(width)]
    answered = call_ids[::-1][: width // 2] if crash else call_ids[::-1]
    said: list[Message] = [Message.user(f"question {name}")]
    if width:
        said += [calls(shape, call_ids, text="looking"), *results(shape, answered)]
    if not crash:
        said.append(Message.assistant(f"answer {name}"))
    stamp = "2026-07-19T00:00:00+00:00"
    return [MessageEntry(id=f"{name}-{n}", timestamp=stamp, message=m) for n, m in enumerate(said)]


def orphans(pairs: Sequence[tuple[str, Message]], shape: PairingDialect) -> set[Any]:
    """The orphans of a context, each named by its message's entry id."""
    found = check_pairing([m for _, m in pairs], dialect=shape)
    return {(pairs[o.index][0], o.call_id, o.problem) for o in found}


@pytest.mark.asyncio
class ContextContract:
    """Contexts with entry ids, repaired contexts, and compactions that keep
    the last messages without cutting a tool exchange."""

    # ---------------------------------------------------------- ids

    async def test_context_ids_are_the_entry_ids_of_a_full_load(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        assert await store.load_context_with_ids(session) == []
        await store.append_many(session, [message("e1", "a"), message("e2", "b")])
        assert [i for i, _ in await store.load_context_with_ids(session)] == ["e1", "e2"]
        # A compaction keeping e2: the summary carries the compaction's id.
        await store.append_many(session, [compaction("c1", "s", "e2"), message("e3", "c")])
        pairs = await store.load_context_with_ids(session)
        assert [i for i, _ in pairs] == ["c1", "e2", "e3"]
        assert pairs == reference_ids(await store.load(session))
        assert [m for _, m in pairs] == await store.load_context(session)
        # One keeping an id no message has: what follows it, appended later too.
        await store.append_many(session, [message("e4", "d"), compaction("c2", "t", "later")])
        assert [i for i, _ in await store.load_context_with_ids(session)] == ["c2"]
        await store.append(session, message("later", "e"))
        pairs = await store.load_context_with_ids(session)
        assert pairs == reference_ids(await store.load(session))
        assert [i for i, _ in pairs] == ["c2", "later"]

    # ---------------------------------------------------------- repair

    async def test_a_repaired_context_is_one_the_api_takes_and_the_log_is_untouched(
        self, store: SessionStore
    ) -> None:
        for shape in SHAPES:
            session = await store.create(SessionMeta.new())
            crashed = [*turn(shape, "t1", 3, crash=True), *turn(shape, "t2", 2)]
            await store.append_many(session, crashed)
            plain = await store.load_context(session)
            assert plain == build_context(crashed)
            assert check_pairing(plain, dialect=shape) != []
            repaired = await store.load_context(session, repair=shape)
            assert check_pairing(repaired, dialect=shape) == []
            assert await store.load(session) == crashed
            assert await store.load_context(session) == plain
            with pytest.raises(ConfigurationError):
                await store.load_context(session, repair="cobol")  # type: ignore[arg-type]

    # ---------------------------------------------------------- compact

    async def test_compact_keeps_at_least_keep_last_messages_at_every_count(
        self, store: SessionStore
    ) -> None:
        history = [message(f"m{n}", f"text {n}") for n in range(5)]
        for keep_last in range(len(history) + 3):
            session = await store.create(SessionMeta.new())
            await store.append_many(session, history)
            entry = await store.compact(session, f"keep {keep_last}", keep_last=keep_last)
            assert (await store.load(session))[-1] == entry
            kept = history[len(history) - min(keep_last, len(history)) :]
            expected_first = kept[0].id if kept else entry.id  # names no message
            assert entry.first_kept_id == expected_first
            assert entry.summary == f"keep {keep_last}"
            assert entry.tokens_before is None
            assert await store.load_context_with_ids(session) == [
                (entry.id, summary_message(entry)),
                *((e.id, e.message) for e in kept),
            ]

    async def test_compact_again_summarizes_the_previous_summary_never_keeps_it(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message(f"m{n}", "x") for n in range(4)])
        await store.compact(session, "first", keep_last=2, tokens_before=900)
        second = await store.compact(session, "second", keep_last=10, tokens_before=500)
        assert second.first_kept_id == "m2"
        assert second.tokens_before == 500
        assert [i for i, _ in await store.load_context_with_ids(session)] == [second.id, "m2", "m3"]
        empty = await store.create(SessionMeta.new())
        only = await store.compact(empty, "nothing yet", keep_last=3)
        assert only.first_kept_id == only.id
        await store.append(empty, message("n1", "after"))
        assert [i for i, _ in await store.load_context_with_ids(empty)] == [only.id, "n1"]

    async def test_a_compaction_cuts_a_stored_system_prompt_like_any_message(
        self, store: SessionStore
    ) -> None:
        # The format's rule, the reference's too: the summary, then what is
        # kept. A system prompt is the application's to send first (docs/stores.md).
        session = await store.create(SessionMeta.new())
        prompt = MessageEntry(id="s0", timestamp="t", message=Message.system("be brief"))
        await store.append_many(session, [prompt, message("m1", "a"), message("m2", "b")])
        entry = await store.compact(session, "asked for a", keep_last=1)
        context = await store.load_context_with_ids(session)
        assert context == [(entry.id, summary_message(entry)), ("m2", Message.user("b"))]

    @pytest.mark.parametrize("shape", SHAPES)
    @pytest.mark.parametrize("named", [True, False], ids=["named", "any-dialect"])
    @needs(Capability.BRANCHES)
    async def test_compact_never_leaves_an_orphan_of_parallel_tool_calls(
        self, store: SessionStore, shape: PairingDialect, named: bool
    ) -> None:
        source = await store.create(SessionMeta.new())
        history = [*turn(shape, "t1", 3), *turn(shape, "t2", 1), *turn(shape, "t3", 2)]
        await store.append_many(source, history)
        for keep_last in range(len(history) + 2):
            copy = (await store.fork(source)).id
            await store.compact(copy, "s", keep_last=keep_last, dialect=shape if named else None)
            context = await store.load_context(copy)
            assert check_pairing(context, dialect=shape) == []
            assert len(context) - 1 >= min(keep_last, len(history))
            assert context == build_context(await store.load(copy))

    @needs(Capability.BRANCHES)
    async def test_a_fork_compacts_on_its_own(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        history = [*turn("openai", "t1", 2), *turn("openai", "t2", 2)]
        await store.append_many(source, history)
        before = await store.load_context(source)
        fork = (await store.fork(source, at="t2-0")).id
        entry = await store.compact(fork, "fork summary", keep_last=2)
        context = await store.load_context_with_ids(fork)
        assert context == reference_ids(await store.load(fork))
        assert context[0] == (entry.id, summary_message(entry))
        assert check_pairing([m for _, m in context], dialect="openai") == []
        assert await store.load_context(source) == before
        on_source = await store.compact(source, "source summary", keep_last=1)
        assert (await store.load_context(fork))[0] == summary_message(entry)
        assert (await store.load_context(source))[0] == summary_message(on_source)

    async def test_cached_contexts_stay_right_across_compactions(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        for n in range(6):  # a context asked for every turn: built once, then extended
            await store.append_many(session, turn("anthropic", f"t{n}", n % 3))
            assert await store.load_context(session) == build_context(await store.load(session))
            ids = await store.load_context_with_ids(session)
            assert ids == reference_ids(await store.load(session))
            if n % 2:
                await store.compact(session, f"after {n}", keep_last=n)
                assert await store.load_context_with_ids(session) == reference_ids(
                    await store.load(session)
                )
        await store.compact(session, "all", keep_last=0)
        await store.append(session, message("last", "x"))
        assert await store.load_context(session) == build_context(await store.load(session))

    async def test_compact_refuses_bad_arguments_and_writes_nothing(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append(session, message("e1", "a"))
        bad: list[dict[str, Any]] = [
            {"keep_last": -1},
            {"keep_last": "2"},
            {"keep_last": True},
            {"keep_last": 1, "dialect": "cobol"},
            {"keep_last": 1, "tokens_before": -5},
        ]
        for arguments in bad:
            with pytest.raises(ConfigurationError):
                await store.compact(session, "s", **arguments)
        with pytest.raises(ConfigurationError):
            await store.compact(session, None, keep_last=1)  # type: ignore[arg-type]
        assert await store.load(session) == [message("e1", "a")]

    # ---------------------------------------------------------- a model

    @needs(Capability.BRANCHES)
    async def test_random_agent_histories_compact_and_repair_to_contexts_the_api_takes(
        self, store: SessionStore
    ) -> None:
        """Random turns (parallel calls, crashes mid-turn), compactions and
        forks: `compact` never makes an orphan (none at all unless a crash or
        a fork left one), a repaired context has none, and `load_context` is
        still `build_context(load())`. Each example has its own sessions and
        an event loop of its own, in a thread (stores are shared across loops).
        """
        runs = itertools.count()

        @examples(12)
        @given(st.sampled_from(SHAPES), st.lists(_STEP, min_size=1, max_size=10))
        def check(shape: PairingDialect, steps: list[tuple[str, int, int]]) -> None:
            agent = _Agent(f"h{next(runs)}-", shape)
            asyncio.run(agent.run(store, steps))

        await asyncio.to_thread(check)

    async def test_every_context_is_the_one_definition_over_random_histories(
        self, store: SessionStore
    ) -> None:
        """Random histories of messages (ids drawn from a few, so some repeat),
        compactions keeping from an id that is earlier, later or nowhere, and
        forks: after every step each session's context, built afresh or
        extended from one the store cached, is `context_entries`' of its log."""
        runs = itertools.count()

        @examples(15)
        @given(st.lists(_EDIT, min_size=1, max_size=16))
        def check(edits: list[tuple[str, int, int]]) -> None:
            asyncio.run(_edited(store, f"r{next(runs)}-", edits))

        await asyncio.to_thread(check)


_EDIT = st.tuples(
    st.sampled_from(["message", "message", "message", "compact", "fork", "drop"]),
    st.integers(0, 1000),
    st.integers(0, 1000),
)


async def _edited(store: SessionStore, prefix: str, edits: list[tuple[str, int, int]]) -> None:
    """Run ``edits`` on sessions named from ``prefix``, each session's context
    checked after each edit."""
    made = itertools.count()
    logs: dict[str, list[SessionEntry]] = {}
    logs[await store.create(SessionMeta(id=f"{prefix}{next(made)}"))] = []
    for kind, a, b in edits:
        target = sorted(logs)[a % len(logs)]
        log = logs[target]
        if kind == "message":  # one of six ids; the compactions may keep from a seventh
            added = [message(f"{prefix}m{n % 6}", f"text {n}") for n in range(b, b + 1 + a % 2)]
            await store.append_many(target, added)
            log += added
        elif kind == "compact":
            marker = compaction(f"{prefix}c{next(made)}", f"summary {b}", f"{prefix}m{b % 7}")
            await store.append(target, marker)
            log.append(marker)
        elif kind == "fork" and Capability.BRANCHES in store.capabilities:
            # at an entry whose id is the log's alone, or its end
            alone = [i for i, e in enumerate(log) if [f.id for f in log].count(e.id) == 1]
            at = alone[b % len(alone)] if alone and b % 2 else None
            meta = SessionMeta(id=f"{prefix}{next(made)}")
            fork = await store.fork(target, at=None if at is None else log[at].id, meta=meta)
            logs[fork.id] = list(log if at is None else log[: at + 1])
        else:
            store.drop_caches()
        for session_id, entries in logs.items():
            assert await store.load_context_with_ids(session_id) == reference_ids(entries)
            assert await store.load_context(session_id) == build_context(entries)


_STEP = st.tuples(
    st.sampled_from(["turn", "turn", "crash", "text", "compact", "compact", "fork"]),
    st.integers(0, 1000),
    st.integers(0, 1000),
)


@dataclass
class _Agent:
    """An agent's sessions, with whether a crash or a cut fork left an orphan."""

    prefix: str
    shape: PairingDialect
    sessions: dict[str, bool] = field(default_factory=dict)  # id: may hold an orphan
    made: itertools.count[int] = field(default_factory=itertools.count)

    def _name(self) -> str:
        return f"{self.prefix}{next(self.made)}"

    async def run(self, store: SessionStore, steps: list[tuple[str, int, int]]) -> None:
        root = await store.create(SessionMeta(id=self._name()))
        self.sessions[root] = False
        for kind, a, b in steps:
            target = sorted(self.sessions)[a % len(self.sessions)]
            if kind in ("turn", "crash"):
                entries = turn(self.shape, self._name(), b % 4, crash=kind == "crash")
                await store.append_many(target, entries)
                self.sessions[target] |= kind == "crash" and b % 4 > 0
            elif kind == "text":
                await store.append(target, message(self._name(), "by the way"))
            elif kind == "compact":
                await self._compact(store, target, b % 8, named=bool(a % 2))
            else:
                loaded = await store.load(target)
                at = loaded[b % len(loaded)].id if loaded and b % 3 else None
                meta = SessionMeta(id=self._name())
                fork = (await store.fork(target, at=at, meta=meta)).id
                self.sessions[fork] = self.sessions[target] or at is not None
            await self._check(store, target)

    async def _compact(
        self, store: SessionStore, target: str, keep_last: int, *, named: bool
    ) -> None:
        compacted = any(isinstance(e, CompactionEntry) for e in await store.load(target))
        before = await store.load_context_with_ids(target)
        entry = await store.compact(
            target, "s", keep_last=keep_last, dialect=self.shape if named else None
        )
        after = await store.load_context_with_ids(target)
        assert after[0] == (entry.id, summary_message(entry))
        candidates = before[1:] if compacted else before  # never the previous summary
        kept = after[1:]
        assert len(kept) >= min(keep_last, len(candidates))
        assert kept == candidates[len(candidates) - len(kept) :]
        assert orphans(after, self.shape) <= orphans(before, self.shape)
        if not self.sessions[target]:
            assert orphans(after, self.shape) == set()

    async def _check(self, store: SessionStore, session_id: str) -> None:
        loaded = await store.load(session_id)
        assert await store.load_context(session_id) == build_context(loaded)
        assert await store.load_context_with_ids(session_id) == reference_ids(loaded)
        repaired = await store.load_context(session_id, repair=self.shape)
        assert check_pairing(repaired, dialect=self.shape) == []
