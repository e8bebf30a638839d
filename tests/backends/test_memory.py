"""The memory store gives the event loop a turn at every operation, as a
store that awaits its storage does."""

from __future__ import annotations

import asyncio

from sessionstore import MemoryStore, SessionMeta
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
