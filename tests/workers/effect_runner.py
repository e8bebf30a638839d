"""A separate process that runs side effects through `EffectLog.once`, for
kill tests.

Usage: python effect_runner.py KIND WHERE COUNTER KEYS

KIND is ``file`` (WHERE: an agent directory) or ``store`` (WHERE: a store
target; the journal is named ``agent``). For each key ``k0``... in turn,
the effect appends the key to the file COUNTER and syncs it: the world the
effect changes, kept apart from the journal.

Kill tests run it under tests/workers/forking.py, a child forked per run.
It prints ``ready`` once its journal is open, then, per key, ``done K`` or
``doubt K`` (an effect found in doubt is reported and left), and ``end``.
"""

import asyncio
import os
import sys

from sessionstore import EffectInDoubtError, FileJournal, open_store
from sessionstore.store import SessionJournal


def bump(counter: str, key: str) -> str:
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{key}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


async def run(journal: SessionJournal, counter: str, keys: int) -> None:
    print("ready", flush=True)
    for n in range(keys):
        key = f"k{n}"
        try:
            await journal.effects.once(lambda key=key: bump(counter, key), tool="bump", key=key)
            print("done", key, flush=True)
        except EffectInDoubtError:
            print("doubt", key, flush=True)
    print("end", flush=True)


async def child(kind: str, where: str, counter: str, keys: int) -> None:
    if kind == "file":
        await run(FileJournal.in_dir(where), counter, keys)
        return
    async with open_store(where) as store:
        await run(store.journal("agent"), counter, keys)


if __name__ == "__main__":
    asyncio.run(child(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
