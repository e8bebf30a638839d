"""The SQL store's writer lock: one writer at a time across threads and loops."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sessionstore.backends.sql.database import WriterLock


async def test_writers_of_one_loop_take_turns_in_arrival_order() -> None:
    lock = WriterLock()
    order: list[int] = []

    async def writer(number: int) -> None:
        async with lock.held():
            order.append(number)
            await asyncio.sleep(0)  # let the others queue

    await asyncio.gather(*(writer(n) for n in range(5)))
    assert order == [0, 1, 2, 3, 4]


async def test_a_waiter_cancelled_before_its_turn_leaves_the_queue() -> None:
    lock = WriterLock()
    release = asyncio.Event()

    async def first() -> None:
        async with lock.held():
            await release.wait()

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(_hold(lock))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):  # its own cancellation, nothing else
        await waiter
    release.set()
    await holder
    await asyncio.wait_for(_hold(lock), 1)  # free again: nobody kept it


async def test_a_waiter_cancelled_as_its_turn_comes_passes_the_lock_on() -> None:
    lock = WriterLock()
    release = asyncio.Event()

    async def first() -> None:
        async with lock.held():
            await release.wait()

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    second = asyncio.create_task(_hold(lock))
    third = asyncio.create_task(_hold(lock))
    await asyncio.sleep(0)
    release.set()
    await holder  # the lock is handed to `second`, through the loop...
    second.cancel()  # ...which is cancelled before it runs
    await asyncio.wait_for(third, 1)
    assert second.cancelled()


def test_writers_on_many_loops_never_overlap() -> None:
    lock = WriterLock()
    inside = 0
    most = 0
    guard = threading.Lock()

    async def writers() -> None:
        async def one() -> None:
            nonlocal inside, most
            async with lock.held():
                with guard:
                    inside += 1
                    most = max(most, inside)
                await asyncio.sleep(0.001)
                with guard:
                    inside -= 1

        await asyncio.gather(*(one() for _ in range(20)))

    threads = [threading.Thread(target=asyncio.run, args=(writers(),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert most == 1


async def _hold(lock: WriterLock) -> None:
    async with lock.held():
        pass
