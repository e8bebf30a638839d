"""A separate process that moves one head many times, for concurrency tests.

Usage: python head_mover.py TARGET HEAD SESSION COUNT

Points HEAD at SESSION COUNT times, one move after another, then exits.
"""

import asyncio
import sys

from sessionstore import open_store


async def main(target: str, head: str, session_id: str, count: int) -> None:
    async with open_store(target) as store:
        for _ in range(count):
            await store.set_head(head, session_id)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
