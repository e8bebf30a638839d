"""The store contract as tests: `SessionStoreContract` (see the package docs)."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from sessionstore import (
    CompactionEntry,
    DuplicateSessionError,
    InvalidRecordError,
    InvalidSessionIdError,
    Journal,
    Message,
    MessageEntry,
    SessionConflictError,
    SessionEntry,
    SessionHeader,
    SessionMeta,
    SessionNotFoundError,
    StorageError,
    StreamingMessageError,
    Timestamp,
    build_context,
    encode,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.archives import ArchiveContract
from sessionstore.testing.arguments import ArgumentContract
from sessionstore.testing.branches import BranchContract
from sessionstore.testing.browse import BrowseContract
from sessionstore.testing.capabilities import CALLS, CapabilityContract, needs
from sessionstore.testing.common import (
    IMPORTED_LINES,
    INVALID_IDS,
    UNUSUAL_VALID_IDS,
    Backend,
    blocks,
    compaction,
    drain,
    glance,
    imported_header,
    lines,
    message,
    raw,
    stream,
)
from sessionstore.testing.conditional import ConditionalContract
from sessionstore.testing.contexts import ContextContract
from sessionstore.testing.imports import ImportContract
from sessionstore.testing.lifecycle import LifecycleContract
from sessionstore.testing.retention import RetentionContract
from sessionstore.testing.scoped_contract import ScopedContract
from sessionstore.testing.slices import SliceContract
from sessionstore.wire import limits

__all__ = ["INVALID_IDS", "Backend", "SessionStoreContract", "compaction", "message"]

Call = Callable[[SessionStore, str], Awaitable[object]]


ON_A_SESSION: dict[str, Call] = {
    "append": lambda store, session: store.append(session, message("e1", "x")),
    "append_many": lambda store, session: store.append_many(session, [message("e1", "x")]),
    "load": lambda store, session: store.load(session),
    "load_slice": lambda store, session: store.load_slice(session, -1),
    "load_context": lambda store, session: store.load_context(session),
    "load_context_with_ids": lambda store, session: store.load_context_with_ids(session),
    "compact": lambda store, session: store.compact(session, "s", keep_last=1),
    "iter_entries": lambda store, session: drain(store.iter_entries(session)),
    "raw_lines": lambda store, session: drain(store.raw_lines(session)),
    "raw_blocks": lambda store, session: drain(store.raw_blocks(session)),
    # with after=0: the session must exist
    "import_session": lambda store, session: store.import_session(
        encode(SessionMeta(id=session)), stream([]), after=0
    ),
}
"""A call of each operation on an existing session, with a harmless argument."""

BY_ID: dict[str, Call] = {
    "create": lambda store, session: store.create(SessionMeta(id=session)),
    "journal": lambda store, name: store.journal(name).read(),
    **ON_A_SESSION,
}
"""A call of each operation that takes a session's id, or a journal's name."""


@pytest.mark.asyncio
class SessionStoreContract(
    ArchiveContract,
    ArgumentContract,
    BranchContract,
    CapabilityContract,
    BrowseContract,
    ConditionalContract,
    ContextContract,
    ImportContract,
    LifecycleContract,
    RetentionContract,
    ScopedContract,
    SliceContract,
):
    """Every rule of the store contract, as tests over the ``backend`` fixture;
    each test of a capability runs only where the store declares it
    (`CapabilityContract`)."""

    @pytest_asyncio.fixture
    async def store(self, backend: Backend) -> AsyncIterator[SessionStore]:
        async with await backend.open() as store:
            yield store

    @pytest_asyncio.fixture
    async def session(self, store: SessionStore) -> str:
        return await store.create(SessionMeta.new())

    # ---------------------------------------------------------- round trips

    async def test_create_append_load_list_round_trip(self, store: SessionStore) -> None:
        meta = SessionMeta.new()
        session_id = await store.create(meta)
        assert session_id == meta.id
        first, second = message("e1", "hello"), message("e2", "world")
        await store.append(session_id, first)
        await store.append(session_id, second)
        assert await store.load(session_id) == [first, second]
        assert await store.list() == [meta]

    async def test_an_empty_store_and_a_new_session_hold_nothing(self, store: SessionStore) -> None:
        assert await store.list() == []
        assert await store.journals() == []
        assert await store.integrity() == []
        if Capability.SUMMARIES in store.capabilities:
            assert await store.summaries() == []
        meta = SessionMeta.new()
        await store.create(meta)
        assert await store.load(meta.id) == []
        assert await store.load_context(meta.id) == []
        assert [entry async for entry in store.iter_entries(meta.id)] == []
        assert await raw(store, meta.id) == [encode(meta)]  # its header alone
        assert await blocks(store, meta.id) == f"{encode(meta)}\n".encode()

    async def test_list_and_raw_lines_give_every_header_and_entry_exactly(
        self, store: SessionStore
    ) -> None:
        metas = [
            SessionMeta.new(),
            SessionMeta(id="child", version=7, parent_session="p", created_at="whenever"),
            SessionMeta(id="bare"),
        ]
        for meta in metas:
            await store.create(meta)
        listed = await store.list()
        assert sorted(listed, key=lambda m: m.id) == sorted(metas, key=lambda m: m.id)
        entries: list[SessionEntry] = [message("e1", "Ünï \u2028"), compaction("c1", "s", "e1")]
        await store.append_many("child", entries)
        assert await raw(store, "child") == [encode(metas[1]), *lines(entries)]  # canonical

    async def test_entries_come_back_in_their_exact_form(
        self, store: SessionStore, session: str
    ) -> None:
        entries: list[SessionEntry] = [
            MessageEntry(
                id="m1",
                parent_id="m0",
                timestamp="2026-07-19T00:00:00.123456789+00:00",
                message=Message(
                    role="assistant",
                    content=[{"type": "text", "text": "Ünï \u2028 \x01 😀"}, 1e-7, 2**64 - 1],
                    tool_calls=[{"id": "t1", "arguments": {"z": 1, "a": None}}],
                    name="bot",
                ),
            ),
            CompactionEntry.new("summary", "m1", tokens_before=2**64 - 1),
            CompactionEntry.new("no tokens", "m1"),
        ]
        await store.append_many(session, entries)
        loaded = await store.load(session)
        assert loaded == entries
        assert lines(loaded) == lines(entries)

    async def test_sessions_are_kept_apart(self, store: SessionStore) -> None:
        one = await store.create(SessionMeta.new())
        two = await store.create(SessionMeta.new())
        await store.append(one, message("a", "one"))
        await store.append(two, message("b", "two"))
        assert lines(await store.load(one)) == lines([message("a", "one")])
        assert lines(await store.load(two)) == lines([message("b", "two")])

    async def test_loaded_entries_do_not_share_state_with_the_store(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append(session, MessageEntry.new(Message(role="user", content={"k": [1]})))
        loaded = await store.load(session)
        entry = loaded[0]
        assert isinstance(entry, MessageEntry)
        entry.message.content["k"].append(2)
        again = await store.load(session)
        assert isinstance(again[0], MessageEntry)
        assert again[0].message.content == {"k": [1]}

    # ---------------------------------------------------------- refusals

    async def test_a_second_session_of_an_id_is_refused_and_the_first_kept(
        self, store: SessionStore
    ) -> None:
        meta = SessionMeta.new()
        await store.create(meta)
        await store.append(meta.id, message("e1", "kept"))
        before = await raw(store, meta.id)
        with pytest.raises(DuplicateSessionError) as caught:
            await store.create(SessionMeta(id=meta.id, created_at="other"))
        assert caught.value.session_id == meta.id
        with pytest.raises(DuplicateSessionError) as caught:
            await store.import_session(encode(meta), stream([encode(message("e2", "other"))]))
        assert caught.value.session_id == meta.id
        assert await store.list() == [meta]
        assert await raw(store, meta.id) == before

    @pytest.mark.parametrize("operation", ON_A_SESSION)
    async def test_unknown_session_is_refused(self, store: SessionStore, operation: str) -> None:
        with pytest.raises(SessionNotFoundError) as caught:
            await ON_A_SESSION[operation](store, "missing")
        assert caught.value.session_id == "missing"
        assert await store.list() == []

    @pytest.mark.parametrize("operation", BY_ID)
    async def test_invalid_ids_are_refused_before_storage(
        self, store: SessionStore, operation: str
    ) -> None:
        wrong = []
        for bad_id in INVALID_IDS:
            try:
                await BY_ID[operation](store, bad_id)
            except InvalidSessionIdError:
                continue
            except Exception as exc:
                wrong.append(f"{operation}({bad_id!r}) raised {exc!r}")
            else:
                wrong.append(f"{operation}({bad_id!r}) was not refused")
        assert wrong == []
        assert await store.list() == []
        assert await store.journals() == []

    async def test_unusual_but_valid_ids_work(self, store: SessionStore) -> None:
        for odd_id in UNUSUAL_VALID_IDS:
            await store.create(SessionMeta(id=odd_id))
            await store.append(odd_id, message("e1", "x"))
            assert len(await store.load(odd_id)) == 1
        assert sorted(m.id for m in await store.list()) == sorted(UNUSUAL_VALID_IDS)

    async def test_streaming_message_is_refused_and_nothing_stored(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append(session, message("e1", "final"))
        partial = MessageEntry.new(Message(role="assistant", content="par", streaming=True))
        with pytest.raises(StreamingMessageError) as caught:
            await store.append(session, partial)
        assert (caught.value.session_id, caught.value.entry_id) == (session, partial.id)
        with pytest.raises(StreamingMessageError):
            await store.append_many(session, [message("e2", "ok"), partial])
        assert [e.id for e in await store.load(session)] == ["e1"]

    async def test_unencodable_entry_is_refused_and_nothing_stored(
        self, store: SessionStore, session: str
    ) -> None:
        bad = MessageEntry.new(Message(role="user", content=math.nan))
        with pytest.raises(InvalidRecordError, match=session):
            await store.append_many(session, [message("e1", "ok"), bad])
        with pytest.raises(InvalidRecordError):
            await store.append(session, SessionMeta.new())  # type: ignore[arg-type]
        assert await store.load(session) == []

    @pytest.mark.parametrize("depth", [128, 1_500, 100_000])
    async def test_a_value_nested_too_deep_is_refused_naming_the_session_and_limit(
        self, store: SessionStore, session: str, depth: int
    ) -> None:
        value: object = 0
        for _ in range(depth):  # past Python's recursion limit too
            value = [value]
        deep = [
            MessageEntry.new(Message(role="user", content=value)),
            MessageEntry.new(Message(role="user", content="", name={"x": value})),
        ]
        for entry in deep:
            with pytest.raises(InvalidRecordError, match=f"{session}.*deeper than 127 levels"):
                await store.append(session, entry)
            with pytest.raises(InvalidRecordError, match=f"{session}.*deeper than 127 levels"):
                await store.append_many(session, [message("e1", "ok"), entry])
        assert await store.load(session) == []

    async def test_a_line_longer_than_the_wire_reads_is_refused_and_nothing_stored(
        self, store: SessionStore, session: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(limits, "MAX_LINE", 4_000)  # 64 MiB by default
        await store.append(session, message("e1", "x" * 3_000))
        long = message("e2", "é" * 1_990)  # under the limit in characters, not in bytes
        refusal = f"session '{session}', entry 'e2': a line of 4[0-9]{{3}} bytes, longer than"
        with pytest.raises(InvalidRecordError, match=refusal):
            await store.append(session, long)
        with pytest.raises(InvalidRecordError, match=refusal):
            await store.append_many(session, [message("e3", "ok"), long])
        assert [entry.id for entry in await store.load(session)] == ["e1"]

    async def test_a_closed_store_refuses_every_operation(self, backend: Backend) -> None:
        async with await backend.open() as store:  # which closes it
            session_id = await store.create(SessionMeta.new())
        await store.close()  # twice is fine
        calls: list[Call] = [
            *BY_ID.values(),
            *(call for capability in store.capabilities for call in CALLS[capability].values()),
            lambda store, _: store.list(),
            lambda store, _: store.integrity(),
            lambda store, _: store.journals(),
        ]
        for call in calls:
            with pytest.raises(StorageError, match="closed"):
                await call(store, session_id)

    # ---------------------------------------------------------- journals

    async def test_journals_are_kept_apart_and_listed(self, store: SessionStore) -> None:
        header = SessionHeader(started_at=Timestamp.parse("2026-10-13T11:00:00Z"), model="m")
        await store.journal("agent-1").begin(header, Journal())
        await store.journal("agent-2").append_raw(b"x")
        assert sorted(await store.journals()) == ["agent-1", "agent-2"]
        read = await store.journal("agent-1").read()
        assert [s.header for s in read.sessions] == [header]
        assert (await store.journal("agent-2").read()).skipped == [1]
        assert await store.journal("agent-3").read() == Journal()

    # ---------------------------------------------------------- append_many

    async def test_append_many_of_nothing_stores_nothing_but_needs_the_session(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [])
        assert await store.load(session) == []
        with pytest.raises(SessionNotFoundError):
            await store.append_many("missing", [])

    async def test_append_many_batches_stay_contiguous_under_concurrency(
        self, store: SessionStore, session: str
    ) -> None:
        async def turn(task: int) -> None:
            for round_ in range(5):
                batch = [message(f"t{task}-r{round_}-{i}", "x") for i in range(3)]
                await store.append_many(session, batch)

        await asyncio.gather(*(turn(task) for task in range(10)))
        ids = [entry.id for entry in await store.load(session)]
        assert len(ids) == 150
        for start in range(0, 150, 3):
            prefixes = {entry_id.rsplit("-", 1)[0] for entry_id in ids[start : start + 3]}
            assert len(prefixes) == 1, ids[start : start + 3]

    async def test_fifty_tasks_appending_keep_every_entry_once_in_task_order(
        self, store: SessionStore, session: str
    ) -> None:
        async def writer(task: int) -> None:
            for n in range(20):
                await store.append(session, message(f"{task}:{n}", "x"))

        await asyncio.gather(*(writer(task) for task in range(50)))
        ids = [entry.id for entry in await store.load(session)]
        assert sorted(ids) == sorted(f"{t}:{n}" for t in range(50) for n in range(20))
        for task in range(50):
            own = [int(i.split(":")[1]) for i in ids if i.split(":")[0] == str(task)]
            assert own == list(range(20))

    # ---------------------------------------------------------- load_context

    @pytest.mark.parametrize(
        "log",
        [
            [message("e1", "a"), message("e2", "b")],
            [message("e1", "old"), message("e2", "kept"), compaction("c1", "sum", "e2")],
            [
                message("e1", "a"),
                compaction("c1", "first", "e1"),
                message("e2", "b"),
                compaction("c2", "second", "e2"),
                message("e3", "c"),
            ],
            [message("e1", "old"), compaction("c1", "sum", "nonexistent"), message("e2", "new")],
            [compaction("c1", "only a summary", "e9")],
        ],
        ids=["no-compaction", "cut", "last-wins", "fallback", "summary-only"],
    )
    async def test_load_context_equals_build_context_of_load(
        self, store: SessionStore, session: str, log: list[SessionEntry]
    ) -> None:
        await store.append_many(session, log)
        context = await store.load_context(session)
        assert context == build_context(await store.load(session))
        assert context == build_context(log)

    @needs(Capability.SUMMARIES)
    async def test_summaries_list_a_session_that_does_not_decode_with_its_fault(
        self, backend: Backend, store: SessionStore
    ) -> None:
        if backend.damage is None:
            pytest.skip("this backend holds nothing that does not decode")
        good, bad = SessionMeta(id="good", created_at="c"), SessionMeta(id="bad")
        for meta in (good, bad):
            await store.create(meta)
            await store.append_many(meta.id, [message("e1", "a"), compaction("c1", "s", "e1")])
        await backend.damage(bad.id)
        store.drop_caches()
        summaries = {summary.meta.id: summary for summary in await store.summaries()}
        assert summaries.keys() == {"good", "bad"}
        timestamp = "2026-07-19T00:00:00+00:00"
        assert glance(summaries["good"]) == (good, 2, timestamp, True, None)
        assert summaries["bad"].fault is not None
        assert "session 'bad'" in summaries["bad"].fault
        assert summaries["bad"].entries <= 2

    async def test_iter_entries_streams_what_load_returns(
        self, store: SessionStore, session: str
    ) -> None:
        # Longer than a page of the SQL store and a read of the JSONL one.
        text = "x" * 600
        log: list[SessionEntry] = [message(f"e{n}", f"{text}{n}") for n in range(4500)]
        log.insert(2000, compaction("c1", "sum", "e1000"))
        for start in range(0, len(log), 1000):
            await store.append_many(session, log[start : start + 1000])
        streamed = [entry async for entry in store.iter_entries(session)]
        assert streamed == log
        assert streamed == await store.load(session)

    async def test_iter_entries_left_early_lets_go_of_what_it_held(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message("e1", "a"), message("e2", "b")])
        stream = store.iter_entries(session)
        assert await anext(stream) == message("e1", "a")
        await stream.aclose()  # what it held (a file, a cursor) is let go
        await store.append(session, message("e3", "c"))
        assert len([entry async for entry in store.iter_entries(session)]) == 3

    # ---------------------------------------------------------- threads and loops

    async def test_threads_each_running_their_own_loops_share_one_store(
        self, store: SessionStore, session: str
    ) -> None:
        # A threaded web server: each request runs asyncio.run(...) on the
        # same store object. This test's own loop is blocked meanwhile, so
        # nothing may depend on the loop the store was opened on.
        def worker(name: str) -> None:
            for n in range(100):
                asyncio.run(store.append(session, message(f"{name}-{n}", name)))

        _run_threads(worker, [f"t{n}" for n in range(8)])
        entries = await store.load(session)
        assert len(entries) == 800
        for name in (f"t{n}" for n in range(8)):
            mine = [entry.id for entry in entries if entry.id.startswith(f"{name}-")]
            assert mine == [f"{name}-{n}" for n in range(100)]  # each thread's order kept

    async def test_event_loops_in_threads_at_once_share_one_store(
        self, store: SessionStore
    ) -> None:
        async def loop_work(name: str) -> None:
            session_id = await store.create(SessionMeta(id=f"s-{name}"))

            async def task(number: int) -> None:
                for n in range(10):
                    turn = [message(f"{number}-{n}-a", "q"), message(f"{number}-{n}-b", "a")]
                    await store.append_many(session_id, turn)
                    await store.load_context(session_id)

            await asyncio.gather(*(task(number) for number in range(5)))
            await store.append(session_id, compaction("c", "summary", "0-9-a"))
            assert await store.load_context(session_id) == build_context(
                await store.load(session_id)
            )

        _run_threads(lambda name: asyncio.run(loop_work(name)), ["a", "b", "c", "d"])
        assert sorted(meta.id for meta in await store.list()) == ["s-a", "s-b", "s-c", "s-d"]
        for name in "abcd":
            entries = await store.load(f"s-{name}")
            assert len(entries) == 101
            for n, entry in enumerate(entries[:-1:2]):  # each turn stays contiguous
                assert entries[2 * n + 1].id == entry.id[:-1] + "b"

    # ---------------------------------------------------------- raw lines and blocks

    async def test_raw_lines_begun_before_an_append_give_a_prefix_of_the_session(
        self, store: SessionStore, session: str
    ) -> None:
        await store.append_many(session, [message("e1", "a"), message("e2", "b")])
        before = await raw(store, session)
        reading = store.raw_lines(session)
        first = await anext(reading)
        await store.append(session, message("e3", "c"))
        given = [first, *[line async for line in reading]]
        assert given[: len(before)] == before  # what was stored when it began
        assert given == (await raw(store, session))[: len(given)]  # the new entry, or not

    async def test_raw_blocks_hold_whole_lines_across_many_blocks(
        self, store: SessionStore, session: str
    ) -> None:
        # About 2.4 MB: more than two blocks (a megabyte) of a file or of
        # lines, more than a page (2000 rows) of the SQL store, and one line
        # longer than a block.
        small = [message(f"e{n}", "x" * 420) for n in range(2200)]
        await store.append_many(session, small[:2100])
        await store.append(session, message("big", "\u00e9" * 600_000))
        await store.append_many(session, small[2100:])
        given = [block async for block in store.raw_blocks(session)]
        assert all(block.endswith(b"\n") for block in given)
        expected = "".join(f"{line}\n" for line in await raw(store, session))
        assert b"".join(given) == expected.encode()

    # ---------------------------------------------------------- summaries and integrity

    @needs(Capability.SUMMARIES)
    async def test_summaries_give_each_session_its_header_count_last_time_and_compaction(
        self, store: SessionStore
    ) -> None:
        empty, plain, compacted = (SessionMeta(id=name) for name in ("empty", "plain", "compacted"))
        for meta in (empty, plain, compacted):
            await store.create(meta)
        await store.append_many(
            plain.id,
            [
                message("p1", "a", "2026-07-19T00:00:01Z"),
                message("p2", "b", "2026-07-19T00:00:02Z"),
            ],
        )
        await store.append_many(
            compacted.id,
            [
                message("c1", "a"),
                compaction("c2", "sum", "c1"),
                message("c3", "b", "2026-07-19T00:00:03Z"),
            ],
        )
        summaries = sorted(await store.summaries(), key=lambda summary: summary.meta.id)
        assert [glance(summary) for summary in summaries] == [
            (compacted, 3, "2026-07-19T00:00:03Z", True, None),
            (empty, 0, None, False, None),
            (plain, 2, "2026-07-19T00:00:02Z", False, None),
        ]

    async def test_integrity_finds_nothing_after_appends_imports_and_refusals(
        self, store: SessionStore, session: str
    ) -> None:
        async def writer(task: int) -> None:
            for n in range(5):
                await store.append_many(
                    session, [message(f"{task}:{n}:{i}", "x") for i in range(2)]
                )

        await asyncio.gather(*(writer(task) for task in range(5)))
        header = imported_header("imported")
        await store.import_session(header, stream(IMPORTED_LINES[:2]))
        await store.import_session(header, stream(IMPORTED_LINES[2:]), after=2)
        await store.append("imported", message("e6", "x"))
        with pytest.raises(InvalidRecordError):
            await store.import_session(header, stream([*IMPORTED_LINES, "not json"]), after=6)
        with pytest.raises(SessionConflictError):
            await store.import_session(header, stream(IMPORTED_LINES), after=2)
        with pytest.raises(InvalidRecordError):
            await store.import_session(imported_header("refused"), stream(["not json"]))
        assert await store.integrity() == []


def _run_threads(work: Callable[[str], None], names: list[str]) -> None:
    """Run ``work(name)`` in a thread per name, at once; re-raise the first
    failure, and fail on a thread still running after a minute (a hang)."""
    failures: list[BaseException] = []

    def run(name: str) -> None:
        try:
            work(name)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a thread hangs"
    if failures:
        raise failures[0]
