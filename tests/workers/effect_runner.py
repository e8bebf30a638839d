"""A separate process that runs side effects through `EffectLog.once`, for
kill tests.

Usage: python effect_runner.py KIND WHERE COUNTER KEYS

KIND is ``file`` (WHERE: an agent directory) or ``store`` (WHERE: a store
target; the journal is named ``agent``). For each key ``k0``... in turn,
the effect appends the key to the file COUNTER and syncs it: the world the
effect changes, kept apart from the journal.

The process imports sessionstore once, then runs the effects in a child
forked for each line ``run`` it reads on stdin (a kill test kills many
runs, and a fork costs far less than a new interpreter). For each run the
child prints ``pid P`` (its own), ``ready`` once its journal is open,
then, per key, ``done K`` or ``doubt K`` (an effect found in doubt is
reported and left) and ``end``; once the child is gone, the
process prints ``exit S``, its wait status, on a line of its own.
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


def serve(kind: str, where: str, counter: str, keys: int) -> None:
    for command in sys.stdin:
        if command.strip() != "run":
            break
        pid = os.fork()
        if pid == 0:
            try:
                print("pid", os.getpid(), flush=True)  # before anything else it prints
                asyncio.run(child(kind, where, counter, keys))
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(f"\nexit {status}", flush=True)  # on a line of its own: a kill may cut one


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
