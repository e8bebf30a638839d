"""The memory store gives the event loop a turn at every operation, as a
store that awaits its storage does, and keeps the contexts it built."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from sessionstore import MemoryStore, SessionMeta
from sessionstore.backends.memory import DECODED_AT_ONCE
from sessionstore.testing.common import message


async def test_two_tasks_running_memory_store_operations_take_turns() -> None:
    store = MemoryStore()
    done: list[str] = []

    async def run(name: str) -> None:
        session_id = await store.create(SessionMeta.new())
        journal = store.journal(name)
        for number in range(5):
            await store.append(session_id, message(f"{name}{number}", "hello"))
            await store.load_context(session_id)
            await journal.append_raw(b"{}")
            async for _ in store.raw_lines(session_id):
                pass
            done.append(name)

    await asyncio.gather(run("a"), run("b"))
    # Neither task ran all its operations before the other had a turn.
    assert done[:2] == ["a", "b"]


async def test_a_context_is_kept_between_calls_until_drop_caches() -> None:
    store = MemoryStore()
    session_id = await store.create(SessionMeta.new())
    await store.append(session_id, message("m1", "hello"))
    first = await store.load_context(session_id)
    await store.append(session_id, message("m2", "again"))
    second = await store.load_context(session_id)
    # Read on from the kept context: its first message is the one built before.
    assert [m.content for m in second] == ["hello", "again"]
    assert second[0] is first[0]
    store.drop_caches()
    third = await store.load_context(session_id)
    assert third == second
    assert third[0] is not second[0]


async def test_a_session_made_again_after_an_erase_has_none_of_the_old_context() -> None:
    store = MemoryStore()
    session_id = await store.create(SessionMeta.new())
    await store.append_many(session_id, [message("m1", "old"), message("m2", "older")])
    assert len(await store.load_context(session_id)) == 2
    await store.erase(session_id, reason="asked to")
    await store.create(SessionMeta(id=session_id))
    await store.append_many(
        session_id, [message("n1", "new"), message("n2", "two"), message("n3", "three")]
    )
    assert [m.content for m in await store.load_context(session_id)] == ["new", "two", "three"]


async def test_lines_imported_onto_a_session_extend_its_kept_context() -> None:
    store = MemoryStore()
    source = MemoryStore()
    session_id = await source.create(SessionMeta.new())
    await source.append_many(session_id, [message("m1", "one"), message("m2", "two")])
    lines = [line async for line in source.raw_lines(session_id)]

    async def entries(chosen: list[str]) -> AsyncIterator[str]:
        for line in chosen:
            yield line

    await store.import_session(lines[0], entries(lines[1:2]))
    assert [m.content for m in await store.load_context(session_id)] == ["one"]
    await store.import_session(lines[0], entries(lines[2:]), after=1)
    assert [m.content for m in await store.load_context(session_id)] == ["one", "two"]


async def test_a_long_session_is_read_in_steps_that_let_other_tasks_run() -> None:
    store = MemoryStore()
    session_id = await store.create(SessionMeta.new())
    entries = [message(f"m{number}", f"text {number}") for number in range(3 * DECODED_AT_ONCE)]
    await store.append_many(session_id, entries)
    turns = 0
    reading = True

    async def other_task() -> None:
        nonlocal turns
        while reading:
            turns += 1
            await asyncio.sleep(0)

    for read in (store.load, store.load_context):
        turns, reading = 0, True
        ticking = asyncio.create_task(other_task())
        result = await read(session_id)
        seen, reading = turns, False
        await ticking
        assert len(result) == len(entries)
        # One turn at the start of the call, one between each two steps.
        assert seen >= 3
    assert await store.load(session_id) == entries
