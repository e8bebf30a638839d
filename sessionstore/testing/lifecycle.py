"""The lifecycle contract as tests: erasing sessions and journals (part of
`SessionStoreContract`)."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from sessionstore import (
    ConfigurationError,
    Erasure,
    SessionConflictError,
    SessionMeta,
    SessionNotFoundError,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import Backend, message


async def _file_bytes(store: SessionStore, session_id: str) -> bytes:
    return b"".join([block async for block in store.raw_blocks(session_id)])


async def _gone(store: SessionStore, session_id: str) -> None:
    """Every way to reach ``session_id`` says it is not found."""
    with pytest.raises(SessionNotFoundError):
        await store.load(session_id)
    with pytest.raises(SessionNotFoundError):
        await store.load_context(session_id)
    with pytest.raises(SessionNotFoundError):
        await store.append(session_id, message("late", "x"))
    with pytest.raises(SessionNotFoundError):
        async for _ in store.raw_lines(session_id):
            pass
    assert session_id not in [meta.id for meta in await store.list()]
    assert session_id not in [s.meta.id for s in await store.summaries()]


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
        data = await _file_bytes(store, doomed)
        record = await store.erase(doomed, reason="the user asked")
        assert isinstance(record, Erasure)
        assert (record.kind, record.name, record.reason, record.lines) == (
            "session",
            "doomed",
            "the user asked",
            2,
        )
        assert record.digest == hashlib.blake2b(data, digest_size=32).hexdigest()
        assert record.at
        assert await store.erasures() == [record]
        await _gone(store, doomed)
        assert await store.load(kept) == [message("k1", "stays")]
        assert await store.integrity() == []

    @needs(Capability.ERASURE)
    async def test_an_erase_given_a_digest_refuses_a_changed_session(
        self, store: SessionStore
    ) -> None:
        session = await store.create(SessionMeta(id="s"))
        await store.append(session, message("e1", "archived"))
        seen = hashlib.blake2b(await _file_bytes(store, session), digest_size=32).hexdigest()
        await store.append(session, message("e2", "appended since"))
        with pytest.raises(SessionConflictError, match="changed"):
            await store.erase(session, reason="retired", digest=seen)
        assert len(await store.load(session)) == 2
        assert await store.erasures() == []
        now = hashlib.blake2b(await _file_bytes(store, session), digest_size=32).hexdigest()
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
            await _gone(store, fork)
        else:
            assert await store.load(fork) == expected
            assert await store.load_context(fork) == [m.message for m in expected]  # type: ignore[union-attr]
        await _gone(store, source)
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
        await _gone(store, session)
        assert await store.integrity() == []

    @needs(Capability.ERASURE, Capability.SUMMARIES)
    async def test_erasures_are_kept_for_good(self, backend: Backend) -> None:
        if not backend.persistent:
            pytest.skip("the storage is the store object itself")
        async with await backend.open() as store:
            await store.create(SessionMeta(id="s"))
            await store.append("s", message("e1", "secret"))
            record = await store.erase("s", reason="r")
            journal = store.journal("agent")
            await journal.append_raw(b"a line")
            journal_record = await journal.erase(reason="gone")
        async with await backend.open() as store:
            assert await store.erasures() == [record, journal_record]
            await _gone(store, "s")
            assert await store.journals() == []

    @needs(Capability.ERASURE)
    async def test_a_journal_is_erased_whole(self, store: SessionStore) -> None:
        journal = store.journal("agent")
        assert await journal.erase(reason="nothing there") is None
        await journal.append_raw(b"one", b"two")
        await journal.append_raw(b"three")
        record = await journal.erase(reason="the user asked")
        assert record is not None
        assert (record.kind, record.name, record.lines) == ("journal", "agent", 3)
        assert record.digest == hashlib.blake2b(b"one\ntwo\nthree\n", digest_size=32).hexdigest()
        assert await journal.read_bytes() == b""
        assert await store.journals() == []
        assert await store.erasures() == [record]
        with pytest.raises(ConfigurationError):
            await journal.erase(reason="")
        await journal.append_raw(b"new")  # a journal may start again
        assert await journal.read_bytes() == b"new\n"

    @needs(Capability.ERASURE)
    async def test_a_cleared_journal_is_erased_with_what_it_keeps(
        self, store: SessionStore
    ) -> None:
        journal = store.journal("agent")
        await journal.append_raw(b"one", b"two")
        await journal.clear()
        await journal.append_raw(b"three")
        record = await journal.erase(reason="r")
        assert record is not None
        # A store that keeps a journal's history (memory, SQL) erases the
        # cleared lines too; one whose clear deletes them (JSONL) had only the rest.
        kept = {3: b"one\ntwo\nthree\n", 1: b"three\n"}[record.lines]
        assert record.digest == hashlib.blake2b(kept, digest_size=32).hexdigest()
        assert await journal.read_bytes() == b""
        assert await store.erasures() == [record]
