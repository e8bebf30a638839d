"""A separate process that appends to one session, for concurrency and crash tests.

Usage: python appender.py TARGET SESSION_ID WORKER COUNT [PADDING]

Each entry's text is ``WORKER:N:`` followed by PADDING ``x``s (long lines
make a torn or interleaved write likely if locking fails). After each
append returns, the worker prints ``N`` on its own line and flushes, so a
parent that kills it knows which appends had returned.
"""

import asyncio
import sys

from sessionstore import Message, MessageEntry, open_store


async def main(target: str, session_id: str, worker: str, count: int, padding: int) -> None:
    async with open_store(target) as store:
        for n in range(count):
            text = f"{worker}:{n}:" + "x" * padding
            await store.append(session_id, MessageEntry.new(Message.user(text)))
            print(n, flush=True)


if __name__ == "__main__":
    target, session_id, worker, count = sys.argv[1:5]
    padding = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    asyncio.run(main(target, session_id, worker, int(count), padding))
