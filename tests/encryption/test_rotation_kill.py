"""Rotation killed (SIGKILL) part way, with appends running: no entry
unreadable, none lost, and a rotation run again to its end lets the old
master key go (docs/encryption.md, Rotation). Each trial rotates to a new
key: a retired key is never current again."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import sys
import textwrap
from pathlib import Path

from sessionstore import Message, MessageEntry, SessionMeta, SqlStore, generate_key
from tests.kinds import TEST_KEYS

OLD = TEST_KEYS[0]
SESSIONS = 60
TRIALS = 6

APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from sessionstore import Message, MessageEntry, SqlStore

    async def main(db, keys, out, sessions):
        store = await SqlStore.open(db, keys=keys.split(","))
        with open(out, "a") as record:
            n = 0
            while True:
                session_id = f"s{n % int(sessions)}"
                entry = MessageEntry(
                    id=f"a{n}", timestamp="2026-12-02T00:00:00Z", message=Message.user(f"m{n}")
                )
                await store.append(session_id, entry)
                record.write(f"{session_id} a{n}\\n")  # once the append returned
                record.flush()
                n += 1

    asyncio.run(main(*sys.argv[1:]))
    """
)

ROTATOR = textwrap.dedent(
    """
    import asyncio, sys
    from sessionstore import SqlStore

    async def main(db, new, old):
        async with await SqlStore.open(db, keys=[new, old]) as store:
            print("open", flush=True)
            print(await store.rotate_keys(), flush=True)

    asyncio.run(main(*sys.argv[1:]))
    """
)


async def test_rotation_killed_with_appends_running_loses_and_hides_nothing(
    tmp_path: Path,
) -> None:
    db, record = str(tmp_path / "s.db"), tmp_path / "appended"
    chain = [OLD, *(generate_key() for _ in range(TRIALS))]  # each trial rotates to the next
    async with await SqlStore.open(db, keys=OLD) as store:
        for n in range(SESSIONS):
            await store.create(SessionMeta(id=f"s{n}"))
            entry = MessageEntry.new(Message.user(f"first of s{n}"))
            await store.append(f"s{n}", entry)
    every = ",".join(reversed(chain))  # the appender holds every key: it makes none
    appender = await asyncio.create_subprocess_exec(
        sys.executable, "-c", APPENDER, db, every, str(record), str(SESSIONS)
    )
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    mixed = 0  # kills that left some keys wrapped by each master
    try:
        for old, new in itertools.pairwise(chain):
            rotator = await asyncio.create_subprocess_exec(
                sys.executable, "-c", ROTATOR, db, new, old, stdout=asyncio.subprocess.PIPE
            )
            assert rotator.stdout is not None
            assert await rotator.stdout.readline() == b"open\n"
            await asyncio.sleep(rng.uniform(0.0, 0.15))
            if rotator.returncode is None:
                rotator.send_signal(signal.SIGKILL)
            await rotator.wait()
            async with await SqlStore.open(db, keys=[new, old]) as store:
                mixed += len(await store.keyring_report()) == 2
                await store.rotate_keys()  # run again: to its end
        assert mixed >= 1  # a kill did land part way
    finally:
        appender.send_signal(signal.SIGKILL)
        await appender.wait()
    async with await SqlStore.open(db, keys=[chain[-1], chain[-2]]) as store:
        assert await store.rotate_keys() == 0  # nothing left under an older key
    appended = [line.split() for line in record.read_text().splitlines() if line.strip()]
    assert len(appended) > SESSIONS  # the appends did run meanwhile
    async with await SqlStore.open(db, keys=chain[-1]) as store:  # the old keys no longer needed
        held = {n: {e.id for e in await store.load(f"s{n}")} for n in range(SESSIONS)}
        assert await store.integrity() == []
    for session_id, entry_id in appended:
        assert entry_id in held[int(session_id[1:])], (session_id, entry_id)
