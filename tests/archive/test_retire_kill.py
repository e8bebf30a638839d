"""`retire` killed with SIGKILL at random moments loses nothing.

A real process retires many sessions (forks among them) from a persistent
store and is killed several times, at a random step of its run. After each
kill every session is in the store or in the archive, or both, with the
bytes it had; a final run finishes the job, and importing the archive
brings every session back byte for byte. The memory kind does not outlive
a process: its crash logic is tested in ``test_retire.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sessionstore import SessionMeta, SessionStore, import_archive, open_store, retire
from sessionstore.testing.common import message, raw
from tests.archive.helpers import archive_files
from tests.helpers import WORKERS, ForkServer, killed_at_step
from tests.kinds import PERSISTENT_KINDS, StoreTargets

RETIRER = WORKERS / "retirer.py"
FAMILIES = 15  # each: a session, a fork of it, a fork of the fork
KILLS = 5
OLD = "2020-01-01T00:00:00+00:00"


async def fill(store: SessionStore) -> None:
    """Families of three: ``fN`` <- ``fN-fork`` <- ``fN-fork-fork``, each with
    entries of its own after the fork (SQL shares the rows of the prefix)."""
    for n in range(FAMILIES):
        root = f"f{n}"
        await store.create(SessionMeta(id=root, created_at=OLD))
        await store.append_many(root, [message(f"{root}-{i}", "x" * 300, OLD) for i in range(8)])
        parent = root
        for child in (f"{root}-fork", f"{root}-fork-fork"):
            await store.fork(parent, at=f"{root}-3", meta=SessionMeta(id=child, created_at=OLD))
            await store.append(child, message(f"{child}-own", "mine", OLD))
            parent = child


async def snapshot(store: SessionStore) -> dict[str, bytes]:
    return {
        meta.id: "".join(line + "\n" for line in await raw(store, meta.id)).encode()
        for meta in await store.list()
    }


@pytest.mark.parametrize("kind", PERSISTENT_KINDS)
async def test_retire_killed_at_random_moments_loses_nothing(
    kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    target = store_targets.new(kind)
    archive = tmp_path / "archive"
    async with open_store(target) as store:
        await fill(store)
        original = await snapshot(store)
    sessions = len(original)
    seed = random.randrange(1 << 32)
    chance = random.Random(seed)
    killed = 0
    async with ForkServer(RETIRER) as server:
        for _ in range(KILLS):
            # A step of the run: 0 is before the export ends, up to 2 * sessions.
            step = chance.randrange(0, 2 * sessions)
            killed += await killed_at_step(server, [target, str(archive)], step)
            async with open_store(target) as store:
                stored = await snapshot(store)
            copies = archive_files(archive)
            for session_id, data in original.items():
                assert session_id in stored or session_id in copies, (seed, session_id)
                if session_id in stored:
                    assert stored[session_id] == data, (seed, session_id)
                if session_id in copies:
                    assert copies[session_id] == data, (seed, session_id)
            assert set(stored) <= set(original), seed
    assert killed >= 2, f"seed {seed}: the kills did not land mid-run"

    async with open_store(target) as store:
        report = await retire(store, archive, before="2100-01-01T00:00:00Z")
        assert report.ok, (seed, report)
        assert await store.list() == []
        assert archive_files(archive) == original
        await import_archive(store, archive)
        assert await snapshot(store) == original
