"""A separate process that applies a retention policy: every session idle for
30 days goes, but the newest 2 of each owner stay.

Usage: python expirer.py TARGET ACTION ARCHIVE [wait]

ACTION is ``expire`` or ``retire`` (into ARCHIVE; ``-`` for expire). Prints
``ready`` once the store is open (with ``wait``, it then waits for a line
on stdin before it starts, so that two runs start together), then ``DONE
TOTAL`` after each step of the run (each session erased; for retire, each
exported, then each checked and erased), flushed, so that a test can kill
it at a chosen moment; at the end ``ok GONE ALREADY_GONE`` (how many it
erased, and found erased by another) when nothing was left for a fault.
"""

import asyncio
import sys
from datetime import timedelta

from sessionstore import open_store
from sessionstore.retention import Policy, apply


def progress(done: int, total: int) -> None:
    print(done, total, flush=True)


async def main(target: str, action: str, archive: str | None, wait: bool) -> None:
    policy = Policy(
        action="retire" if action == "retire" else "expire",
        to=archive,
        idle_for=timedelta(days=30),
        keep_newest=2,
    )
    async with open_store(target) as store:
        print("ready", flush=True)
        if wait:
            await asyncio.to_thread(sys.stdin.readline)
        report = await apply(store, policy, progress=progress)
        if report.ok:
            print("ok", len(report.gone), len(report.already_gone), flush=True)
        else:
            print(f"not ok: {report.left}", flush=True)


if __name__ == "__main__":
    target, action, archive = sys.argv[1:4]
    wait = sys.argv[4:] == ["wait"]
    asyncio.run(main(target, action, None if archive == "-" else archive, wait))
