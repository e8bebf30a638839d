"""A separate process that applies a retention policy: every session idle for
30 days goes, but the newest 2 of each owner stay.

Usage: python expirer.py TARGET ACTION [ARCHIVE]

ACTION is ``expire`` or ``retire`` (into ARCHIVE). Prints ``ready`` once
the store is open, then ``DONE TOTAL`` after each step of the run (each
session erased; for retire, each exported, then each checked and erased),
flushed, so that a test can kill it at a chosen moment; ``ok`` at the end
when nothing was left for a fault.
"""

import asyncio
import sys
from datetime import timedelta

from sessionstore import open_store
from sessionstore.retention import Policy, apply


def progress(done: int, total: int) -> None:
    print(done, total, flush=True)


async def main(target: str, action: str, archive: str | None) -> None:
    policy = Policy(
        action="retire" if action == "retire" else "expire",
        to=archive,
        idle_for=timedelta(days=30),
        keep_newest=2,
    )
    async with open_store(target) as store:
        print("ready", flush=True)
        report = await apply(store, policy, progress=progress)
        print("ok" if report.ok else f"not ok: {report.left}", flush=True)


if __name__ == "__main__":
    target, action = sys.argv[1:3]
    asyncio.run(main(target, action, sys.argv[3] if len(sys.argv) > 3 else None))
