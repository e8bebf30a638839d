"""The lifecycle contract as tests: erasing sessions and journals (part of
`SessionStoreContract`)."""

from __future__ import annotations

import asyncio

import pytest

from sessionstore import (
    ConfigurationError,
    Erasure,
    HeadMove,
    SessionConflictError,
    SessionEntry,
    SessionMeta,
    SessionNotFoundError,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import (
    Backend,
    blocks,
    compaction,
    digest,
    gone,
    lines,
    message,
    reads_as,
)


@pytest.mark.asyncio
class LifecycleContract:
    """A session or journal leaves a store only whole, by `erase`, recorded.
    Runs over the ``store`` and ``backend`` fixtures of `SessionStoreContract`."""

    @needs(Capability.ERASURE, Capability.SUMMARIES)
    async def test_erase_removes_the_session_and_records_it(self, store: SessionStore) -> None:
        kept = await store.create(SessionMeta(id="kept"))
        await store.append(kept, message("k1", "stays"))
        doomed = await store.create(SessionMeta(id="doomed"))
        await store.append_many(doomed, [message("e1", "a"), message("e2", "b")])
        await store.load_context(doomed)  # a cached context must go too
        data = await blocks(store, doomed)
        record = await store.erase(doomed, reason="the user asked")
        assert isinstance(record, Erasure)
        assert (record.kind, record.name, record.reason, record.lines) == (
            "session",
            "doomed",
            "the user asked",
            2,
        )
        assert record.digest == digest(data)
        assert record.at
        assert await store.erasures() == [record]
        await gone(store, doomed)
        assert await store.load(kept) == [message("k1", "stays")]
        assert await store.integrity() == []

    @needs(Capability.ERASURE)
    async def test_an_erase_given_a_digest_refuses_a_changed_session(
        self, store: SessionStore
    ) -> None:
        session = await store.create(SessionMeta(id="s"))
        await store.append(session, message("e1", "archived"))
        seen = digest(await blocks(store, session))
        await store.append(session, message("e2", "appended since"))
        with pytest.raises(SessionConflictError, match="changed"):
            await store.erase(session, reason="retired", digest=seen)
        assert len(await store.load(session)) == 2
        assert await store.erasures() == []
        now = digest(await blocks(store, session))
        record = await store.erase(session, reason="retired", digest=now.upper())
        assert record.digest == now

    @needs(Capability.ERASURE)
    async def test_refused_erasures_record_nothing(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta(id="s"))
        with pytest.raises(SessionNotFoundError, match="ghost"):
            await store.erase("ghost", reason="r")
        for reason in ("", "   ", None, 3):
            with pytest.raises(ConfigurationError):
                await store.erase(session, reason=reason)  # type: ignore[arg-type]
        await store.erase(session, reason="r")
        with pytest.raises(SessionNotFoundError):
            await store.erase(session, reason="again")
        assert len(await store.erasures()) == 1

    @needs(Capability.ERASURE)
    async def test_an_erased_id_may_be_used_again(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="s"))
        await store.append("s", message("old", "old"))
        await store.erase("s", reason="r")
        await store.create(SessionMeta(id="s"))
        await store.append("s", message("new", "new"))
        assert await store.load("s") == [message("new", "new")]
        assert [m.text() for m in await store.load_context("s")] == ["new"]
        assert await store.integrity() == []

    @needs(Capability.BRANCHES, Capability.ERASURE, Capability.SUMMARIES)
    async def test_forks_keep_working_or_the_erase_names_them(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta(id="source"))
        await store.append_many(source, [message("e1", "a"), message("e2", "b")])
        fork = (await store.fork(source, meta=SessionMeta(id="fork"))).id
        await store.append(fork, message("f1", "c"))
        expected = await store.load(fork)
        refused: SessionConflictError | None = None
        try:
            await store.erase(source, reason="r")
        except SessionConflictError as exc:
            refused = exc
        if refused is not None:  # the fork shares its entries: nothing changed
            assert "fork" in str(refused)
            assert len(await store.load(source)) == 2
            assert await store.erasures() == []
            await store.erase(fork, reason="r")  # forks first, then their source
            await store.erase(source, reason="r")
            await gone(store, fork)
        else:
            assert await store.load(fork) == expected
            assert await store.load_context(fork) == [m.message for m in expected]  # type: ignore[union-attr]
        await gone(store, source)
        assert await store.integrity() == []

    @needs(Capability.BRANCHES, Capability.ERASURE)
    async def test_a_head_on_an_erased_session_keeps_its_history(self, store: SessionStore) -> None:
        session = await store.create(SessionMeta(id="s"))
        await store.set_head("chat", session)
        await store.erase(session, reason="r")
        assert await store.head("chat") == "s"
        assert [move.session_id for move in await store.head_history("chat")] == ["s"]
        with pytest.raises(SessionNotFoundError):
            await store.set_head("chat", "s")

    @needs(Capability.ERASURE, Capability.SUMMARIES)
    async def test_appends_racing_an_erase_land_before_it_or_fail(
        self, store: SessionStore
    ) -> None:
        session = await store.create(SessionMeta(id="s"))
        outcomes: list[str] = []

        async def writer(n: int) -> None:
            try:
                await store.append(session, message(f"w{n}", "x"))
                outcomes.append("stored")
            except SessionNotFoundError:
                outcomes.append("refused")

        writers = [asyncio.create_task(writer(n)) for n in range(30)]
        await asyncio.sleep(0)
        record = await store.erase(session, reason="r")
        await asyncio.gather(*writers)
        assert outcomes.count("stored") == record.lines  # erased with it
        await gone(store, session)
        assert await store.integrity() == []

    async def test_a_new_store_object_reads_all_an_earlier_one_stored(
        self, backend: Backend
    ) -> None:
        if not backend.persistent:
            pytest.skip("backend declares persistent=False: its storage is the object itself")
        meta = SessionMeta.new()
        entries: list[SessionEntry] = [message("e1", "hello"), compaction("c1", "summary", "e1")]
        moves = [HeadMove(session_id="s", at="2026-01-01T00:00:00Z")] * 2
        erased: list[Erasure | None] = []
        async with await backend.open() as store:
            capabilities = store.capabilities
            await store.create(meta)
            await store.append_many(meta.id, entries)
            await store.journal("agent").append_raw(b"kept")
            if Capability.BRANCHES in capabilities:
                await store.fork(meta.id, at="e1", meta=SessionMeta(id="fork"))
                await store.append("fork", message("f1", "c"))
                await store.set_head("conversation", "fork")
                await store.import_head("chat", moves)
            if Capability.TITLES in capabilities:
                change = await store.set_title(meta.id, "renamed")
            if Capability.ERASURE in capabilities:
                await store.create(SessionMeta(id="s"))
                await store.append("s", message("e1", "secret"))
                erased.append(await store.erase("s", reason="r"))
                await store.journal("erased").append_raw(b"a line")
                erased.append(await store.journal("erased").erase(reason="gone"))
        async with await backend.open() as store:
            assert lines(await store.load(meta.id)) == lines(entries)
            listed = await store.list()
            assert meta in listed
            assert len(listed) == 1 + (Capability.BRANCHES in capabilities)
            assert await store.journals() == ["agent"]
            assert (await store.journal("agent").read()).skipped == [1]
            if Capability.BRANCHES in capabilities:
                await reads_as(store, "fork", [message("e1", "hello"), message("f1", "c")])
                assert await store.head("conversation") == "fork"
                assert await store.head_history("chat") == moves
            if Capability.TITLES in capabilities:
                assert await store.titles(meta.id) == [change]
            if {Capability.TITLES, Capability.SUMMARIES} <= capabilities:
                titles = {s.id: s.title for s in await store.summaries()}
                assert titles[meta.id] == "renamed"
            if Capability.ERASURE in capabilities:
                assert await store.erasures() == erased
                await gone(store, "s")
            assert await store.integrity() == []

    @needs(Capability.ERASURE)
    async def test_an_erased_journal_is_recorded_with_what_it_keeps_and_unlisted(
        self, store: SessionStore
    ) -> None:
        journal = store.journal("agent")
        await journal.append_raw(b"one", b"two")
        await journal.clear()
        await journal.append_raw(b"three")
        record = await journal.erase(reason="r")
        assert record is not None
        assert (record.kind, record.name) == ("journal", "agent")
        # A store that keeps a journal's history (memory, SQL) erases the
        # cleared lines too; one whose clear deletes them (JSONL) had only the rest.
        kept = {3: b"one\ntwo\nthree\n", 1: b"three\n"}[record.lines]
        assert record.digest == digest(kept)
        assert await journal.read_bytes() == b""
        assert await store.journals() == []
        assert await store.erasures() == [record]
