"""A separate process that vacuums a SQLite store in small steps.

Usage: python vacuumer.py TARGET

Prints ``ready`` once it starts, then the free pages left after each step,
flushed, so that a test can kill it at a chosen moment; ``ok`` at the end
when the vacuum completed.
"""

import asyncio
import sys

from sessionstore import vacuum


def progress(done: int, total: int) -> None:
    print(total - done, flush=True)


async def main(target: str) -> None:
    with open(target, "rb") as file:  # in the page cache: the run is the vacuum's
        while file.read(1 << 20):
            pass
    print("ready", flush=True)
    # Steps of about a millisecond: many of them, and many moments to be killed at.
    report = await vacuum(target, chunk=0.001, progress=progress)
    print("ok" if report.complete else f"not ok: {report}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
