"""A separate process that forks one session and appends to both sides.

Usage: python forker.py TARGET SOURCE_ID WORKER COUNT

Each round forks the source as it stands into ``WORKER-N``, appends
``WORKER:N:fork`` to the fork and ``WORKER:N:source`` to the source, then
prints ``N`` and flushes.
"""

import asyncio
import sys

from sessionstore import Message, MessageEntry, SessionMeta, open_store


async def main(target: str, source_id: str, worker: str, count: int) -> None:
    async with open_store(target) as store:
        for n in range(count):
            fork = await store.fork(source_id, meta=SessionMeta(id=f"{worker}-{n}"))
            await store.append(fork.id, MessageEntry.new(Message.user(f"{worker}:{n}:fork")))
            await store.append(source_id, MessageEntry.new(Message.user(f"{worker}:{n}:source")))
            await store.set_head(worker, fork.id)
            print(n, flush=True)


if __name__ == "__main__":
    target, source_id, worker, count = sys.argv[1:5]
    asyncio.run(main(target, source_id, worker, int(count)))
