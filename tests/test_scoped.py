"""Scoped stores beyond the contract: integrity, archives, adapters' keeping,
names, nesting, and the blocking view."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import (
    ArchiveError,
    ClosedError,
    ConfigurationError,
    InvalidSessionIdError,
    MemoryStore,
    ScopedStore,
    SessionMeta,
    SessionNotFoundError,
    export_archive,
    import_archive,
)
from sessionstore import open_store as open_async_store
from sessionstore.sync import SyncScopedStore, open_store
from sessionstore.testing.contract import message


class _Faulty(MemoryStore):
    """A memory store whose integrity check reports the faults it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.faults: builtins.list[str] = []

    async def integrity(self) -> builtins.list[str]:
        return list(self.faults)


async def test_integrity_gives_only_the_faults_naming_the_owner_s_things() -> None:
    store = _Faulty()
    view, other = store.scoped("alice"), store.scoped("bob")
    await view.create(SessionMeta(id="mine"))
    await other.create(SessionMeta(id="theirs"))
    store.faults = [
        "session 'mine': 3 entries but seq runs 1..4",
        "session 'theirs': 3 entries but seq runs 1..4",
        "session 'mine': 1 entries but seq runs 1..1 (it shares 2)",
        f"head {view.prefix + 'main'!r}: 2 positions but seq runs to 3",
        f"head {other.prefix + 'main'!r}: 2 positions but seq runs to 3",
        "integrity_check: *** in database main ***",
        "head 'main': 2 positions but seq runs to 3",
    ]
    assert await view.integrity() == [
        "session 'mine': 3 entries but seq runs 1..4",
        "session 'mine': 1 entries but seq runs 1..1 (it shares 2)",
        "head 'main': 2 positions but seq runs to 3",
    ]
    assert await other.integrity() == [
        "session 'theirs': 3 entries but seq runs 1..4",
        "head 'main': 2 positions but seq runs to 3",
    ]
    assert await store.integrity() == store.faults


async def test_integrity_matches_each_fault_s_subject_exactly_whatever_sessions_are_named(
    tmp_path: Path,
) -> None:
    # Bob's sessions named as alice's head, her files and her words (made by
    # the store: a view refuses ids of another owner's prefix) neither show
    # him her faults nor hide them from her.
    store = _Faulty()
    alice, bob = store.scoped("alice"), store.scoped("bob")
    session = await alice.create(SessionMeta.new())
    head, journal = alice.prefix + "current", alice.prefix + "agent"
    for name in (head, journal, session + ".jsonl", "torn", "heads"):
        await store.create(SessionMeta(id=name, owner="bob"))
    where = tmp_path / "store"
    alices = [
        f"head {head!r}, {where}/heads/{head}.jsonl line 2: invalid head move: 'torn'",
        f"{where}/heads/{head}.jsonl: not a regular file (a link?): not listed",
        f"{where}/journals/{journal}/session_journal.jsonl: Permission denied: not listed",
        f"{where}/erasing/journal/{journal}: the erase of journal {journal!r} did not finish",
        f"session {session!r}, {where}/{session}.jsonl line 3: torn line 'heads'",
        f"{where}/titles/{session}.jsonl: the titles of no session (its file is gone)",
        f"journal {journal!r}: erasure 4 was left open",
    ]
    bobs = f"{where}/{session}.jsonl.jsonl: Permission denied: not listed"
    store.faults = [*alices, bobs]
    assert await alice.integrity() == [
        alices[0].replace(f"head {head!r}", "head 'current'", 1),
        *alices[1:6],
        "journal 'agent': erasure 4 was left open",
    ]
    assert await bob.integrity() == [bobs]


async def test_a_jsonl_head_s_fault_is_its_owner_s_whatever_sessions_are_named(
    tmp_path: Path,
) -> None:
    async with await open_async_store(str(tmp_path / "store")) as store:
        alice, bob = ScopedStore(store, "alice"), ScopedStore(store, "bob")
        session = await alice.create(SessionMeta.new())
        await alice.set_head("current", session)
        await store.create(SessionMeta(id=alice.prefix + "current", owner="bob"))
        path = tmp_path / "store" / "heads" / f"{alice.prefix}current.jsonl"
        with path.open("ab") as file:
            file.write(b'{"torn": 1}\n')
        (fault,) = await store.integrity()
        assert fault.startswith(f"head {alice.prefix + 'current'!r}, {path} line 2: ")
        assert await alice.integrity() == [fault.replace(alice.prefix, "", 1)]
        assert await bob.integrity() == []


async def test_a_refusal_chains_nothing_for_a_damaged_header_or_an_id_never_held(
    tmp_path: Path,
) -> None:
    async with await open_async_store(str(tmp_path / "store")) as store:
        alice, bob = ScopedStore(store, "alice"), ScopedStore(store, "bob")
        session = await alice.create(SessionMeta.new())
        path = tmp_path / "store" / f"{session}.jsonl"
        path.write_bytes(b"\xff" + path.read_bytes()[1:])  # bit rot in the header
        for session_id in (session, "never-held"):
            for stream in (bob.raw_lines, bob.raw_blocks):
                with pytest.raises(SessionNotFoundError) as refused:
                    async for _ in stream(session_id):
                        pass
                assert refused.value.session_id == session_id
                assert (refused.value.__cause__, refused.value.__context__) == (None, None)
                assert str(tmp_path) not in str(refused.value)


async def test_a_tenant_s_archive_goes_out_and_back_in_through_views(tmp_path: Path) -> None:
    store = MemoryStore()
    alice, bob = store.scoped("alice"), store.scoped("bob")
    session = await alice.create(SessionMeta.new())
    await alice.append(session, message("a1", "hello"))
    await alice.set_head("main", session)
    await alice.journal("agent").append_raw(b'{"key":"k"}')
    await bob.create(SessionMeta(id="bob-only"))
    report = await export_archive(alice, tmp_path / "alice")
    assert (report.sessions, report.heads, report.journals) == (1, 1, 1)
    assert not (tmp_path / "alice" / "sessions" / "bob-only.jsonl").exists()

    elsewhere = MemoryStore()
    await import_archive(elsewhere.scoped("alice"), tmp_path / "alice")
    again = elsewhere.scoped("alice")
    assert await again.load(session) == [message("a1", "hello")]
    assert await again.head("main") == session
    assert await again.journals() == ["agent"]
    # Another tenant cannot take alice's archive as its own.
    with pytest.raises(ArchiveError, match="imports only its sessions"):
        await import_archive(MemoryStore().scoped("mallory"), tmp_path / "alice")


async def test_what_adapters_keep_is_kept_apart_for_each_owner() -> None:
    store = MemoryStore()
    alice, bob = store.scoped("alice"), store.scoped("bob")
    kept: dict[str, int] = alice.kept("adapter", dict)
    assert alice.kept("adapter", dict) is kept
    assert store.scoped("alice").kept("adapter", dict) is kept  # while the store lives
    assert bob.kept("adapter", dict) is not kept
    assert store.kept("adapter", dict) is not kept


async def test_an_owner_filter_is_checked_as_the_store_checks_it() -> None:
    store = MemoryStore()
    view = store.scoped("alice")
    for owner in [7, "lone \ud800"]:
        told = []
        for on in (store, view):
            with pytest.raises(ConfigurationError) as listing:
                await on.summaries(owner=owner)  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError) as search:
                await on.search("x", owner=owner)  # type: ignore[arg-type]
            told.append((str(listing.value), str(search.value)))
        assert told[0] == told[1], owner


async def test_names_leave_room_for_the_owner_s_prefix() -> None:
    view = MemoryStore().scoped("alice")
    room = 200 - len(view.prefix)
    view.journal("j" * room)
    with pytest.raises(InvalidSessionIdError, match=f"{room} UTF-8 bytes") as raised:
        view.journal("j" * (room + 1))
    assert raised.value.session_id == "j" * (room + 1)
    with pytest.raises(InvalidSessionIdError):
        await view.head("h" * (room + 1))


async def test_a_view_of_a_view_reaches_only_what_both_owners_hold() -> None:
    store = MemoryStore()
    alice = store.scoped("alice")
    session = await alice.create(SessionMeta.new())
    assert await alice.scoped("alice").load(session) == []
    with pytest.raises(SessionNotFoundError):
        await alice.scoped("bob").load(session)
    assert await alice.scoped("bob").list() == []


async def test_the_prefix_is_the_owner_s_alone() -> None:
    store = MemoryStore()
    prefixes = {ScopedStore(store, owner).prefix for owner in ["a", "b", "a:", "ä", "a/b"]}
    assert len(prefixes) == 5
    assert ScopedStore(MemoryStore(), "a").prefix == ScopedStore(store, "a").prefix


def test_a_blocking_view_closes_alone(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        with store.scoped("alice") as alice:
            assert isinstance(alice, SyncScopedStore)
            session = alice.create(SessionMeta.new())
            alice.append(session, message("a1", "hi"))
            assert [e.id for e in alice.iter_entries(session)] == ["a1"]
            alice.journal("agent").append_raw(b'{"key":"k"}')
            assert alice.journal("agent").keyed("k") == {"k": [b'{"key":"k"}']}
            assert alice.run(lambda view: view.journals()) == ["agent"]
            with pytest.raises(SessionNotFoundError):
                store.scoped("bob").load(session)
        with pytest.raises(ClosedError):
            alice.load(session)
        assert store.load(session) == [message("a1", "hi")]  # the store stays open
        assert store.list()[0].owner == "alice"
        assert store.scoped("bob").summaries() == []
    with pytest.raises(ClosedError):
        alice.list()  # closed with the store's loop
    alice.close()  # closing it again, after the store, is fine


class _Counting(MemoryStore):
    """A memory store counting the headers read through `raw_lines`."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        self.reads += 1
        return super().raw_lines(session_id)


async def test_a_view_checks_every_call_unless_told_to_remember() -> None:
    store = _Counting()
    view = store.scoped("alice")
    session = await view.create(SessionMeta.new())
    await view.load(session)
    await view.load(session)
    assert store.reads == 2
    remembering = store.scoped("alice", remember=2)
    await remembering.load(session)
    await remembering.load(session)
    await remembering.append(session, message("a1", "x"))
    assert store.reads == 3  # one check, then remembered
    made = await remembering.create(SessionMeta.new())  # made by the view: known
    await remembering.load(made)
    assert store.reads == 3
    await remembering.create(SessionMeta.new())  # a third: the least used is forgotten
    await remembering.load(session)
    assert store.reads == 4
    remembering.drop_caches()
    await remembering.load(session)
    assert store.reads == 5


async def test_a_view_that_remembers_nothing_never_reaches_an_id_made_again_for_another() -> None:
    store = MemoryStore()
    alice, bob = store.scoped("alice"), store.scoped("bob")
    remembering = store.scoped("alice", remember=10)
    await alice.create(SessionMeta(id="chat-1"))
    await remembering.load("chat-1")
    await store.erase("chat-1", reason="erased elsewhere")
    await bob.create(SessionMeta(id="chat-1"))
    await bob.append("chat-1", message("b1", "bob's"))
    with pytest.raises(SessionNotFoundError):
        await alice.load("chat-1")
    # What remembering trades away, as its docstring says: use unguessable ids.
    assert await remembering.load("chat-1") == [message("b1", "bob's")]


async def test_a_view_forgets_what_it_erases_and_refuses_another_owner_s_alike() -> None:
    store = MemoryStore()
    view = store.scoped("alice", remember=10)
    hostile = store.scoped("bob", remember=10)
    session = await view.create(SessionMeta(id="chat-1"))
    await view.erase(session, reason="asked")
    await hostile.create(SessionMeta(id="chat-1"))
    with pytest.raises(SessionNotFoundError):
        await view.load("chat-1")
    with pytest.raises(SessionNotFoundError):
        await hostile.load(await view.create(SessionMeta(id="chat-2")))


def test_remember_is_a_count() -> None:
    for remember in [-1, 1.5, True, "3"]:
        with pytest.raises(ConfigurationError, match="remember"):
            MemoryStore().scoped("alice", remember=remember)  # type: ignore[arg-type]
