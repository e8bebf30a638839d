"""A separate process that retires every session created before 2100 into an archive.

Usage: python retirer.py TARGET ARCHIVE

Prints ``ready`` once the store is open, then ``DONE TOTAL`` after each step
of the retire (each session exported, then each checked and erased),
flushed, so that a test can kill it at a chosen moment; ``ok`` at the end
when the run retired everything it chose.
"""

import asyncio
import sys

from sessionstore import open_store, retire

BEFORE = "2100-01-01T00:00:00Z"


def progress(done: int, total: int) -> None:
    print(done, total, flush=True)


async def main(target: str, archive: str) -> None:
    async with open_store(target) as store:
        print("ready", flush=True)
        report = await retire(store, archive, before=BEFORE, progress=progress)
        print("ok" if report.ok else f"not ok: {report}", flush=True)


if __name__ == "__main__":
    target, archive = sys.argv[1:3]
    asyncio.run(main(target, archive))
