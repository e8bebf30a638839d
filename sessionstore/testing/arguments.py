"""The argument contract as tests (part of `SessionStoreContract`): the rules
of `CoreStore` for text holding a lone surrogate and integers past any count."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from sessionstore import (
    ConfigurationError,
    HeadMove,
    InvalidCursorError,
    InvalidRecordError,
    InvalidSessionIdError,
    SessionConflictError,
    SessionHeader,
    SessionMeta,
    SessionStoreError,
    Timestamp,
    TitleChange,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import drain, message, raw, stream

LONE = "\ud800"
"""A lone surrogate: text UTF-8 cannot carry."""

_STARTED = Timestamp.parse("2026-01-01T00:00:00Z")

HUGE = [2**63 - 1, 2**63, 2**64, 10**30]
"""Integers at and past the largest a database's integer or an index holds."""


@dataclass(frozen=True)
class _Refusal:
    """A call given a lone surrogate, the error it must raise and what its
    message must name (``{session}``: the session's id, ``{head}``: the head's)."""

    call: Callable[[SessionStore, str], Awaitable[object]]
    error: type[SessionStoreError]
    names: tuple[str, ...]


def _header(session: str, text: str) -> str:
    return '{"id":"' + session + '","version":1,"created_at":"' + text + '"}'


def _bad_id(call: Callable[[SessionStore, str], Awaitable[object]]) -> _Refusal:
    return _Refusal(call, InvalidSessionIdError, ("lone surrogate",))


def _record(call: Callable[[SessionStore, str], Awaitable[object]], names: str) -> _Refusal:
    """Refused by `InvalidRecordError` naming each of ``names`` (``"; "`` between)."""
    return _Refusal(call, InvalidRecordError, tuple(names.split("; ")))


def _config(call: Callable[[SessionStore, str], Awaitable[object]], names: str) -> _Refusal:
    return _Refusal(call, ConfigurationError, tuple(names.split("; ")))


REFUSALS: dict[str, _Refusal] = {
    "create meta.owner": _record(
        lambda s, _: s.create(SessionMeta(id="new", created_at="t", owner=LONE)), "'new'; owner"
    ),
    "create meta.tags": _record(
        lambda s, _: s.create(SessionMeta(id="new", created_at="t", tags=("a", LONE))),
        "'new'; tags[1]",
    ),
    "create meta.metadata": _record(
        lambda s, _: s.create(SessionMeta(id="new", created_at="t", metadata={LONE: 1})),
        "'new'; metadata",
    ),
    "create meta.id": _bad_id(lambda s, _: s.create(SessionMeta(id=LONE, created_at="t"))),
    "append entry": _record(
        lambda s, session: s.append(session, message("e2", f"a{LONE}")),
        "{session}; 'e2'; message.content",
    ),
    "append expect_last": _config(
        lambda s, session: s.append(session, message("e2", "x"), expect_last=LONE),
        "{session}; expect_last",
    ),
    "append_many expect_last": _config(
        lambda s, session: s.append_many(session, [message("e2", "x")], expect_last=LONE),
        "{session}; expect_last",
    ),
    "append expect_head": _bad_id(
        lambda s, session: s.append(session, message("e2", "x"), expect_head=LONE)
    ),
    "load_slice expect_head": _bad_id(
        lambda s, session: s.load_slice(session, 0, expect_head=LONE)
    ),
    "append session_id": _bad_id(lambda s, _: s.append(LONE, message("e2", "x"))),
    "load session_id": _bad_id(lambda s, _: s.load(LONE)),
    "load_slice session_id": _bad_id(lambda s, _: s.load_slice(LONE, -1)),
    "iter_entries session_id": _bad_id(lambda s, _: drain(s.iter_entries(LONE))),
    "raw_lines session_id": _bad_id(lambda s, _: raw(s, LONE)),
    "load_context session_id": _bad_id(lambda s, _: s.load_context(LONE)),
    "titles session_id": _bad_id(lambda s, _: s.titles(LONE)),
    "fork at": _record(lambda s, session: s.fork(session, at=LONE), "{session}; at"),
    "fork meta.title": _record(
        lambda s, session: s.fork(session, meta=SessionMeta(id="new", created_at="t", title=LONE)),
        "'new'; title",
    ),
    "erase reason": _config(
        lambda s, session: s.erase(session, reason=f"asked {LONE}"), "{session}; reason"
    ),
    "journal erase reason": _config(lambda s, _: s.journal("agent").erase(reason=LONE), "reason"),
    "journal append header.model": _record(
        lambda s, _: s.journal("agent").append(SessionHeader(started_at=_STARTED, model=LONE)),
        "journal line; model",
    ),
    "journal name": _bad_id(lambda s, _: s.journal(LONE).read()),
    "set_head name": _bad_id(lambda s, session: s.set_head(LONE, session)),
    "set_head session_id": _bad_id(lambda s, _: s.set_head("chat", LONE)),
    "set_head expect": _config(
        lambda s, session: s.set_head("chat", session, expect=LONE), "{head}; expect"
    ),
    "set_head expect_last": _config(
        lambda s, session: s.set_head("chat", session, expect=session, expect_last=LONE),
        "{head}; expect_last",
    ),
    "head name": _bad_id(lambda s, _: s.head(LONE)),
    "head_history name": _bad_id(lambda s, _: s.head_history(LONE)),
    "import_head move.at": _record(
        lambda s, session: s.import_head("chat", [HeadMove(session_id=session, at=LONE)], after=1),
        "{head}; move 1; at",
    ),
    "summaries owner": _config(lambda s, _: s.summaries(owner=LONE), "owner"),
    "summaries after": _Refusal(
        lambda s, _: s.summaries(after=LONE), InvalidCursorError, ("after",)
    ),
    "search text": _config(lambda s, _: s.search(f"hello {LONE}"), "search text"),
    "search owner": _config(lambda s, _: s.search("hello", owner=LONE), "owner"),
    "search after": _Refusal(
        lambda s, _: s.search("hello", after=LONE), InvalidCursorError, ("after",)
    ),
    "set_title title": _record(lambda s, session: s.set_title(session, LONE), "{session}; title"),
    "import_titles title": _record(
        lambda s, session: s.import_titles(
            session, [TitleChange(session_id=session, title=LONE, at="t")]
        ),
        "{session}; title change 1; title",
    ),
    "compact summary": _config(
        lambda s, session: s.compact(session, LONE, keep_last=1), "{session}; summary"
    ),
    "import_session header": _record(
        lambda s, _: s.import_session(_header("new", LONE), stream([])), "header; lone surrogate"
    ),
    "import_session entry": _record(
        lambda s, _: s.import_session(
            _header("new", "t"),
            stream(
                [
                    '{"type":"message","id":"e","timestamp":"t","message":'
                    '{"role":"user","content":"' + LONE + '"}}'
                ]
            ),
        ),
        "'new'; entry 1; lone surrogate",
    ),
}
"""Every text argument of the store API given a lone surrogate, by method and argument."""


async def _state(store: SessionStore, session: str) -> tuple[object, ...]:
    """What a refused call must leave as it was."""
    return (
        [meta.id for meta in await store.list()],
        [entry.id for entry in await store.load(session)],
        [move.session_id for move in await store.head_history("chat")],
        await store.titles(session),
        await store.erasures(),
        await store.journals(),
    )


@pytest.mark.asyncio
class ArgumentContract:
    """Text and integer arguments at their limits."""

    @needs(Capability.BRANCHES, Capability.ERASURE, Capability.TITLES)
    async def test_a_lone_surrogate_is_refused_naming_the_argument(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append(session, message("e1", "hello"))
        await store.set_head("chat", session)
        before = await _state(store, session)
        wrong = []
        for case, refusal in REFUSALS.items():
            try:
                await refusal.call(store, session)
            except refusal.error as exc:
                said = str(exc)
                for name in refusal.names:
                    expected = name.format(session=repr(session), head=repr("chat"))
                    if expected not in said:
                        wrong.append(f"{case}: {said!r} does not name {expected}")
            except Exception as exc:
                wrong.append(f"{case}: raised {exc!r}, not {refusal.error.__name__}")
            else:
                wrong.append(f"{case}: not refused")
            if await _state(store, session) != before:  # nothing written or removed
                wrong.append(f"{case}: changed the store")
                break
        assert wrong == []

    @needs(Capability.BRANCHES, Capability.ERASURE, Capability.SUMMARIES)
    async def test_a_surrogate_pair_is_text_like_any_other(self, store: SessionStore) -> None:
        emoji = "\U0001f600"  # one character, which a narrow build would hold as a pair
        session = await store.create(SessionMeta.new(owner=emoji))
        await store.append(session, message(emoji, f"said {emoji}"))
        forked = await store.fork(session, at=emoji)
        assert {s.id for s in await store.summaries(owner=emoji)} == {forked.id, session}
        await store.erase(forked.id, reason=f"asked {emoji}")
        assert [record.reason for record in await store.erasures()] == [f"asked {emoji}"]

    # ------------------------------------------------------------ integers

    @needs(Capability.SUMMARIES)
    async def test_a_limit_past_every_count_lists_everything(self, store: SessionStore) -> None:
        made = {await store.create(SessionMeta.new()) for _ in range(3)}
        for limit in HUGE:
            for order in ("last_activity", "created"):
                page = await store.summaries(limit=limit, order=order)
                assert {s.id for s in page} == made, f"limit={limit}, order={order}"
            after = (await store.summaries(limit=1))[0].cursor
            rest = await store.summaries(limit=limit, after=after)
            assert len(rest) == 2, f"limit={limit} after a cursor"

    async def test_a_search_limit_past_every_count_finds_everything(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message(f"e{n}", "hello there") for n in range(3)])
        for limit in HUGE:
            hits = await store.search("hello", limit=limit)
            assert sorted(hit.entry_id for hit in hits) == ["e0", "e1", "e2"], f"limit={limit}"

    async def test_slice_positions_past_every_length_slice_as_python_does(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message(f"e{n}", "x") for n in range(3)])
        every = ["e0", "e1", "e2"]
        for big in HUGE:
            for start, stop in [
                (big, None),
                (-big, None),
                (0, big),
                (-big, big),
                (-big, -big),
                (big, -big),
                (1, -big),
            ]:
                got = await store.load_slice(session, start, stop)
                assert [e.id for e in got.entries] == every[start:stop], f"[{start}:{stop}]"
                assert (got.start, got.length) == (slice(start, stop).indices(3)[0], 3)

    async def test_a_compaction_keeping_more_than_there_is_keeps_it_all(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message(f"e{n}", f"text {n}") for n in range(3)])
        for keep_last in HUGE:
            await store.compact(session, "before", keep_last=keep_last)
            context = await store.load_context(session)
            assert [m.text() for m in context][-3:] == ["text 0", "text 1", "text 2"]

    async def test_tokens_before_a_line_cannot_carry_are_refused(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        await store.append(session, message("e1", "hello"))
        for tokens in [2**64, 10**30, -1]:
            with pytest.raises(ConfigurationError, match="tokens_before"):
                await store.compact(session, "s", keep_last=1, tokens_before=tokens)
        assert [entry.id for entry in await store.load(session)] == ["e1"]
        entry = await store.compact(session, "s", keep_last=1, tokens_before=2**64 - 1)
        assert entry.tokens_before == 2**64 - 1

    @needs(Capability.BRANCHES, Capability.TITLES)
    async def test_import_counts_past_every_count_are_conflicts(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta.new())
        header = (await raw(store, session))[0]
        await store.set_head("chat", session)
        for after in HUGE:
            title = TitleChange.new(session, "t")
            assert await store.import_titles(session, [title], after=after) == 0
            with pytest.raises(SessionConflictError):
                await store.import_head("chat", [HeadMove.new(session)], after=after)
            with pytest.raises(SessionConflictError):
                await store.import_session(header, stream([]), after=after)
        assert await store.titles(session) == []
        assert len(await store.head_history("chat")) == 1
