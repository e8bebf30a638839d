"""The scoped-store contract as tests (part of `SessionStoreContract`): a store
seen through `ScopedStore` views of two owners, one of them hostile.

Tenant A keeps sessions, a fork, titles, heads, a journal with keyed lines
and an effect; tenant B's view tries every public operation on A's ids,
head and journal names, cursors and words, and learns nothing: each id of
A's is refused exactly as an id that never existed, listings are empty,
searches find nothing, and A's data is as it was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from sessionstore import (
    CapabilityError,
    ClosedError,
    ConfigurationError,
    HeadMove,
    InvalidCursorError,
    InvalidSessionIdError,
    ScopedStore,
    SessionConflictError,
    SessionMeta,
    SessionNotFoundError,
    SessionStoreError,
    TitleChange,
    encode,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import CALLS, needs
from sessionstore.testing.common import blocks, drain, message, raw, stream

A, B = "tenant-a", "tenant-b"
NEVER = "never-existed"  # an id no test creates

Call = Callable[[SessionStore, str], Awaitable[object]]


ON_AN_ID: dict[str, tuple[Capability | None, Call]] = {
    "append": (None, lambda s, i: s.append(i, message("b1", "x"))),
    "append_many": (None, lambda s, i: s.append_many(i, [message("b1", "x")])),
    "append with expect_last": (None, lambda s, i: s.append(i, message("b1", "x"), expect_last="")),
    "load": (None, lambda s, i: s.load(i)),
    "load_slice": (None, lambda s, i: s.load_slice(i, -1)),
    "iter_entries": (None, lambda s, i: drain(s.iter_entries(i))),
    "load_context": (None, lambda s, i: s.load_context(i)),
    "load_context_with_ids": (None, lambda s, i: s.load_context_with_ids(i)),
    "compact": (None, lambda s, i: s.compact(i, "s", keep_last=0)),
    "raw_lines": (None, lambda s, i: drain(s.raw_lines(i))),
    "raw_blocks": (None, lambda s, i: drain(s.raw_blocks(i))),
    "import_session after": (
        None,
        lambda s, i: s.import_session(
            encode(SessionMeta(id=i, owner=B)), stream([encode(message("b1", "x"))]), after=1
        ),
    ),
    "fork": (Capability.BRANCHES, lambda s, i: s.fork(i)),
    "fork at": (Capability.BRANCHES, lambda s, i: s.fork(i, at="a1")),
    "set_head": (Capability.BRANCHES, lambda s, i: s.set_head("main", i)),
    "import_head": (Capability.BRANCHES, lambda s, i: s.import_head("b-head", [HeadMove.new(i)])),
    "set_title": (Capability.TITLES, lambda s, i: s.set_title(i, "mine now")),
    "titles": (Capability.TITLES, lambda s, i: s.titles(i)),
    "import_titles": (
        Capability.TITLES,
        lambda s, i: s.import_titles(i, [TitleChange.new(i, "mine")], after=0),
    ),
    "erase": (Capability.ERASURE, lambda s, i: s.erase(i, reason="hostile")),
}
"""Each operation given a session id, with arguments that work on a session of the caller's."""


def scoped(store: SessionStore, owner: str) -> SessionStore:
    """``store.scoped(owner)``: a `ScopedStore`, or the blocking facade's view
    of one when the suite runs through it."""
    view: SessionStore = store.scoped(owner)  # type: ignore[attr-defined]  # not in the protocol
    return view


def prefix(store: SessionStore, owner: str) -> str:
    """What the store's names of ``owner``'s heads and journals begin with."""
    return ScopedStore(store, owner).prefix


async def _refusal(call: Awaitable[object]) -> SessionStoreError:
    with pytest.raises(SessionStoreError) as raised:
        await call
    return raised.value


@dataclass
class Tenant:
    """What tenant A keeps, made through its view."""

    view: SessionStore
    session: str
    fork: str | None
    words: str = "zebra quartz"


async def _tenant_a(store: SessionStore) -> Tenant:
    view = scoped(store, A)
    session = await view.create(SessionMeta.new(title="A's plans"))
    await view.append_many(
        session, [message("a1", "zebra quartz secret"), message("a2", "more zebra quartz")]
    )
    fork = None
    if Capability.BRANCHES in store.capabilities:
        fork = (await view.fork(session, at="a1")).id
        await view.set_head("main", session)
    if Capability.TITLES in store.capabilities:
        await view.set_title(session, "A's secret plans")
    journal = view.journal("agent")
    await journal.append_raw(b'{"key":"order-1","total":5}')
    await journal.effects.once(lambda: "sent", tool="mail", key="mail-1")
    return Tenant(view, session, fork)


async def _snapshot(store: SessionStore, tenant: Tenant) -> list[object]:
    """Everything of A's, read through the store itself."""
    view = tenant.view
    ids = sorted(meta.id for meta in await view.list())
    state: list[object] = [ids]
    for session_id in ids:
        state += [await raw(store, session_id), await blocks(store, session_id)]
        if Capability.TITLES in store.capabilities:
            state.append(await store.titles(session_id))
    if Capability.BRANCHES in store.capabilities:
        state += [sorted(await view.heads()), await view.head_history("main")]
    journal = view.journal("agent")
    state += [await journal.read_bytes(), await journal.effects.read(), await view.journals()]
    if Capability.ERASURE in store.capabilities:
        state.append(await store.erasures())
    return state


@pytest.mark.asyncio
class ScopedContract:
    """A scoped view reaches its owner's sessions whole, and nothing of another's."""

    async def test_scoped_owner_must_be_a_non_empty_string(self, store: SessionStore) -> None:
        for owner in ["", None, 7, "lone \ud800", "al\x00", "a\nb", "tab\t", "del\x7f"]:
            with pytest.raises(ConfigurationError, match="owner"):
                scoped(store, owner)  # type: ignore[arg-type]
        assert await store.list() == []

    async def test_scoped_create_gives_sessions_the_owner_and_refuses_another(
        self, store: SessionStore
    ) -> None:
        view = scoped(store, A)
        mine = await view.create(SessionMeta(id="mine"))
        named = await view.create(SessionMeta(id="named", owner=A))
        with pytest.raises(ConfigurationError, match="tenant-b"):
            await view.create(SessionMeta(id="theirs", owner=B))
        assert {meta.id: meta.owner for meta in await store.list()} == {mine: A, named: A}
        assert sorted(meta.id for meta in await view.list()) == ["mine", "named"]

    async def test_scoped_hostile_tenant_cannot_take_ids_of_another_s_prefix(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        taken = await a.view.create(SessionMeta(id=prefix(store, A) + "chat"))
        before = await _snapshot(store, a)
        hostile = scoped(store, B)
        ids = [taken, prefix(store, A) + "not-yet", "owner-" + "0" * 24 + ":no-one's"]
        makes: list[Call] = [
            lambda s, i: s.create(SessionMeta(id=i)),
            lambda s, i: s.create(SessionMeta(id=i, owner=B)),
            lambda s, i: s.import_session(encode(SessionMeta(id=i, owner=B)), stream([])),
        ]
        if Capability.BRANCHES in store.capabilities:
            own = await hostile.create(SessionMeta.new())
            makes.append(lambda s, i: s.fork(own, meta=SessionMeta(id=i)))
        for make in makes:
            refusals = [await _refusal(make(hostile, i)) for i in ids]
            assert {type(error) for error in refusals} == {InvalidSessionIdError}
            assert len({error.reason for error in refusals}) == 1  # type: ignore[attr-defined]
        assert prefix(store, A) not in str([meta.id for meta in await hostile.list()])
        assert await _snapshot(store, a) == before
        # Its own prefix is the view's to use, as the adapters do.
        assert await hostile.create(SessionMeta(id=prefix(store, B) + "chat"))

    async def test_scoped_tenant_uses_its_own_sessions_fully(self, store: SessionStore) -> None:
        a = await _tenant_a(store)
        view = a.view
        assert [m.text() for m in await view.load_context(a.session)] == [
            "zebra quartz secret",
            "more zebra quartz",
        ]
        assert await view.load(a.session) == await store.load(a.session)
        assert (await view.load_slice(a.session, -1)).entries == [
            message("a2", "more zebra quartz")
        ]
        assert [e.id async for e in view.iter_entries(a.session)] == ["a1", "a2"]
        assert await raw(view, a.session) == await raw(store, a.session)
        assert await blocks(view, a.session) == await blocks(store, a.session)
        assert [i for i, _ in await view.load_context_with_ids(a.session)] == ["a1", "a2"]
        await view.compact(a.session, "a summary", keep_last=1)
        hits = await view.search(a.words)
        assert {hit.session_id for hit in hits} >= {a.session}
        assert await view.search(a.words, owner=A) == hits
        assert await view.journals() == ["agent"]
        journal = view.journal("agent")
        assert await journal.keyed("order-1") == {"order-1": [b'{"key":"order-1","total":5}']}
        assert [state.key for state in await journal.effects.read()] == ["mail-1"]
        copy = await view.create(SessionMeta(id="copy"))
        assert await view.import_session(
            encode(SessionMeta(id="imported", owner=A)), stream([encode(message("i1", "x"))])
        )
        assert await view.import_session(
            encode(SessionMeta(id="imported", owner=A)),
            stream([encode(message("i2", "y"))]),
            after=1,
        )
        assert [e.id for e in await view.load("imported")] == ["i1", "i2"]
        with pytest.raises(ConfigurationError, match="tenant-b"):
            await view.import_session(encode(SessionMeta(id="x", owner=B)), stream([]))
        with pytest.raises(ConfigurationError, match="names the owner None"):
            await view.import_session(encode(SessionMeta(id="x")), stream([]))
        assert await view.integrity() == []
        assert copy in [meta.id for meta in await view.list()]

    @needs(Capability.BRANCHES, Capability.TITLES)
    async def test_scoped_tenant_branches_titles_and_heads_are_its_own(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        view = a.view
        assert a.fork is not None
        forked = await view.fork(a.session)
        assert forked.owner == A
        assert forked.parent_session == a.session
        mine = await view.fork(a.session, meta=SessionMeta(id="mine-fork"))
        assert mine.owner == A
        with pytest.raises(ConfigurationError, match="tenant-b"):
            await view.fork(a.session, meta=SessionMeta(id="their-fork", owner=B))
        assert (await view.titles(forked.id))[-1].title == "A's secret plans"
        move = await view.set_head("main", forked.id, expect=a.session, expect_last="a2")
        assert await view.head("main") == forked.id
        assert (await view.head_history("main"))[-1] == move
        assert sorted(await view.heads()) == ["main"]
        await view.append(forked.id, message("f1", "x"), expect_head="main")
        assert (await view.load_slice(forked.id, -1, expect_head="main")).entries[0].id == "f1"
        misread = await _refusal(view.load_slice(a.session, 0, expect_head="main"))
        assert isinstance(misread, SessionConflictError)
        assert (misread.session_id, misread.actual) == ("main", forked.id)
        assert await view.import_head("copy", [move]) == 1
        assert await view.head("copy") == forked.id
        conflict = await _refusal(view.set_head("main", a.session, expect=None))
        assert "'main'" in str(conflict)
        assert prefix(store, A) not in str(conflict)
        # The store keeps the owner's heads under names of their own.
        assert await store.head(prefix(store, A) + "main") == forked.id
        assert await store.head("main") is None

    @needs(Capability.SUMMARIES)
    async def test_scoped_summaries_list_the_owner_s_sessions_and_page_on(
        self, store: SessionStore
    ) -> None:
        view = scoped(store, A)
        other = scoped(store, B)
        for number in range(3):
            await view.create(SessionMeta(id=f"a{number}"))
            await other.create(SessionMeta(id=f"b{number}"))
        first = await view.summaries(limit=2)
        rest = await view.summaries(limit=2, after=first[-1].cursor)
        assert sorted(s.id for s in [*first, *rest]) == ["a0", "a1", "a2"]
        assert [s.id for s in await view.summaries(owner=A)] == [
            s.id for s in await view.summaries()
        ]
        assert await view.summaries(owner=B) == []
        assert await view.summaries(owner=None, order="created", limit=None) != []

    async def test_scoped_hostile_tenant_is_refused_as_for_an_id_never_held(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        before = await _snapshot(store, a)
        hostile = scoped(store, B)
        await hostile.create(SessionMeta(id="b-own"))
        targets = [a.session] if a.fork is None else [a.session, a.fork]
        for operation, (capability, call) in ON_AN_ID.items():
            if capability is not None and capability not in store.capabilities:
                continue
            never = await _refusal(call(hostile, NEVER))
            assert isinstance(never, SessionNotFoundError), operation
            assert (never.__cause__, never.__context__) == (None, None), operation
            if operation != "import_head":  # the store records a move to any id
                assert str(await _refusal(call(store, NEVER))) == str(never), operation
            for target in targets:
                refused = await _refusal(call(hostile, target))
                assert str(refused) == str(never).replace(NEVER, target), operation
                assert isinstance(refused, SessionNotFoundError), operation
                assert refused.session_id == target, operation
                assert (refused.__cause__, refused.__context__) == (None, None), operation
        assert await _snapshot(store, a) == before

    @needs(Capability.BRANCHES)
    async def test_scoped_hostile_tenant_cannot_reach_or_move_another_s_heads(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        before = await _snapshot(store, a)
        hostile = scoped(store, B)
        own = await hostile.create(SessionMeta(id="b-own"))
        assert await hostile.heads() == []
        for name in ["main", prefix(store, A) + "main"]:
            assert await hostile.head(name) is None
            assert await hostile.head_history(name) == []
        # B's "main" is B's own: setting it leaves A's where it was.
        await hostile.set_head("main", own, expect=None)
        assert await hostile.head("main") == own
        await hostile.append(own, message("b1", "x"), expect_head="main")
        assert await hostile.heads() == ["main"]
        # Conditions naming A's session give what an unknown session gives.
        for target in [a.session, NEVER]:
            refused = await _refusal(hostile.set_head("main", own, expect=target, expect_last="a2"))
            assert str(refused) == str(SessionNotFoundError(target))
        await hostile.set_head("main", own, expect=own)
        await store.set_head("main", own)  # a head of the store, outside every view
        assert await hostile.head("main") == own
        assert await a.view.head("main") == a.session
        assert await store.head(prefix(store, B) + "main") == own
        assert await store.head(prefix(store, A) + "main") == a.session
        assert await _snapshot(store, a) == before

    async def test_scoped_hostile_tenant_finds_nothing_in_listings_and_journals(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        page = await a.view.search(a.words, limit=1)
        assert page, "A finds its own words"
        before = await _snapshot(store, a)
        hostile = scoped(store, B)
        assert await hostile.list() == []
        assert await hostile.search(a.words) == []
        assert await hostile.search(a.words, owner=A) == []
        assert await hostile.search("secret", limit=1) == []
        # A's cursor continues A's search only; B is told what any stray cursor tells.
        stray = (await a.view.search("more", limit=1))[0].cursor
        with pytest.raises(InvalidCursorError) as told:
            await a.view.search(a.words, after=stray)
        with pytest.raises(InvalidCursorError) as refused:
            await hostile.search(a.words, after=page[0].cursor)
        assert str(refused.value) == str(told.value)
        assert await hostile.journals() == []
        # A's names in the store, given as B's own, are B's own too.
        spelled = hostile.journal(prefix(store, A) + "agent")
        assert await spelled.read_bytes() == b""
        assert await spelled.keyed("order-1") == {}
        journal = hostile.journal("agent")
        assert await journal.read_bytes() == b""
        assert await journal.keyed("order-1") == {}
        assert await journal.scan("") == []
        assert await journal.effects.read() == []
        assert await journal.effects.find("mail-1") is None
        assert await journal.drop("order-1", reason="hostile") is None
        assert await journal.erase(reason="hostile") is None
        # B's journal of the same name is B's: writing it leaves A's alone.
        await journal.append_raw(b'{"key":"order-1","total":999}')
        assert await hostile.journals() == ["agent"]
        assert await journal.keyed("order-1") == {"order-1": [b'{"key":"order-1","total":999}']}
        assert await hostile.integrity() == []
        for name in [".hidden", "a/b", "x" * 200]:
            with pytest.raises(InvalidSessionIdError):
                hostile.journal(name)
        assert await _snapshot(store, a) == before

    @needs(Capability.SUMMARIES)
    async def test_scoped_hostile_tenant_summaries_and_cursors_give_nothing(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        await a.view.create(SessionMeta(id="a-second"))
        hostile = scoped(store, B)
        await hostile.create(SessionMeta(id="b-own"))
        assert [s.id for s in await hostile.summaries()] == ["b-own"]
        assert await hostile.summaries(owner=A) == []
        for order in ("last_activity", "created"):
            theirs = (await a.view.summaries(order=order, limit=1))[0].cursor
            everyone = (await store.summaries(order=order, limit=1))[0].cursor
            for cursor in [theirs, everyone]:
                with pytest.raises(InvalidCursorError) as refused:
                    await hostile.summaries(order=order, after=cursor)
                assert "another listing" in str(refused.value)
                assert a.session not in str(refused.value)

    @needs(Capability.ERASURE)
    async def test_scoped_erasures_are_the_owner_s_journals_and_erase_is_its_own(
        self, store: SessionStore
    ) -> None:
        a = await _tenant_a(store)
        hostile = scoped(store, B)
        dropped = await a.view.journal("agent").drop("order-1", reason="asked")
        assert dropped is not None
        assert dropped.name == "agent"
        assert await a.view.erasures() == [dropped]
        assert await hostile.erasures() == []
        own = await hostile.create(SessionMeta(id="b-own"))
        await hostile.erase(own, reason="asked")
        assert await hostile.list() == []
        assert await a.view.erasures() == [dropped]
        assert a.session in [meta.id for meta in await a.view.list()]

    async def test_scoped_close_leaves_the_store_open(self, store: SessionStore) -> None:
        async with scoped(store, A) as view:
            session = await view.create(SessionMeta.new())
        with pytest.raises(ClosedError):
            await view.load(session)
        with pytest.raises(ClosedError):
            await view.list()
        assert await store.load(session) == []
        view.drop_caches()  # a view keeps nothing; the store is untouched
        assert await scoped(store, A).load(session) == []

    async def test_scoped_view_of_every_store_declares_its_capabilities(
        self, store: SessionStore
    ) -> None:
        assert scoped(store, A).capabilities == store.capabilities
        assert isinstance(ScopedStore(store, A), SessionStore)

    async def test_scoped_undeclared_capabilities_are_refused_before_any_check(
        self, store: SessionStore
    ) -> None:
        theirs = await scoped(store, A).create(SessionMeta.new())
        hostile = scoped(store, B)
        for capability in set(Capability) - store.capabilities:
            for operation, call in CALLS[capability].items():
                with pytest.raises(CapabilityError) as raised:
                    await call(hostile, theirs)
                assert raised.value.capability is capability, operation
