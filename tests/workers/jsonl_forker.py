"""A separate process that forks one JSONL session again and again, for crash tests.

Usage: python jsonl_forker.py DIRECTORY SOURCE PREFIX AT DURABILITY

Fork N of SOURCE is the session ``PREFIX-N``, its header `header` (so the
test knows its bytes), kept up to the entry AT (``-``: all of them). The
worker prints ``ready`` once its store is open, then, after each fork
returns, ``N`` on its own line, and flushes, so a parent that kills it
knows which forks had returned.
"""

import asyncio
import sys

from sessionstore import JsonlStore, SessionMeta


def header(source: str, fork_id: str) -> SessionMeta:
    """The header of a fork this worker makes."""
    return SessionMeta(id=fork_id, parent_session=source, created_at="2026-01-01T00:00:00Z")


async def main(directory: str, source: str, prefix: str, at: str, durability: str) -> None:
    full = durability == "full"
    async with JsonlStore(directory, durability="full" if full else "normal") as store:
        print("ready", flush=True)
        n = 0
        while True:
            meta = header(source, f"{prefix}-{n}")
            await store.fork(source, at=None if at == "-" else at, meta=meta)
            print(n, flush=True)
            n += 1


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
