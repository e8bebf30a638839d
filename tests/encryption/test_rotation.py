"""After a rotation no store makes a data key under the retired master key,
so dropping it strands nothing; keys given in the wrong order are refused
(docs/encryption.md, Rotation)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from sessionstore import (
    EncryptionKeyError,
    Message,
    MessageEntry,
    SessionMeta,
    SqlStore,
    generate_key,
    open_store,
)
from sessionstore.encryption.keys import MasterKeys
from sessionstore.journal import Journal
from sessionstore.models import SessionHeader
from sessionstore.timestamps import Timestamp
from tests.kinds import TEST_KEYS, StoreTargets

OLD = TEST_KEYS[0]


async def test_a_store_open_with_only_the_old_key_makes_no_key_after_a_rotation(
    tmp_path: Path,
) -> None:
    db, new = str(tmp_path / "s.db"), generate_key()
    async with await SqlStore.open(db, keys=OLD) as worker:  # a worker still on the old key
        await worker.create(SessionMeta(id="before"))
        async with await SqlStore.open(db, keys=[new, OLD]) as rotating:
            await rotating.rotate_keys()
        with pytest.raises(EncryptionKeyError, match="reopen it with the new key first"):
            await worker.create(SessionMeta(id="after"))
        header = SessionHeader(started_at=Timestamp.now(), model="m")
        with pytest.raises(EncryptionKeyError, match="reopen it with the new key first"):
            await worker.journal("j").begin(header, Journal())  # a journal's first line: a key
        assert await worker.load("before") == []  # what it holds still reads
    async with await SqlStore.open(db, keys=new) as store:  # the old key dropped
        assert [meta.id for meta in await store.list()] == ["before"]
        assert await store.integrity() == []


async def test_a_store_open_with_both_keys_wraps_under_the_new_once_rotated(
    tmp_path: Path,
) -> None:
    db, new = str(tmp_path / "s.db"), generate_key()
    async with await SqlStore.open(db, keys=OLD):
        pass
    async with await SqlStore.open(db, keys=[OLD, new]) as worker:  # either order, both given
        async with await SqlStore.open(db, keys=[new, OLD]) as rotating:
            await rotating.rotate_keys()
        await worker.create(SessionMeta(id="after"))
        await worker.append("after", MessageEntry.new(Message.user("sealed under the new key")))
    async with await SqlStore.open(db, keys=new) as store:
        assert len(await store.load("after")) == 1


CREATOR = textwrap.dedent(
    """
    import asyncio, os, sys
    from sessionstore import EncryptionKeyError, SessionMeta, SqlStore

    async def main(target, keyring, old, rotated):
        async with await SqlStore.open(target, keys=old, keyring=keyring or None) as store:
            n, after = 0, 0
            while after < 3:  # three creates once the rotation returned, then done
                after += os.path.exists(rotated)
                try:
                    await store.create(SessionMeta(id=f"c{n}"))
                except EncryptionKeyError as exc:
                    print("refused", exc, flush=True)
                    return
                print(f"c{n}", flush=True)  # once the create returned
                n += 1
            print("done", flush=True)

    asyncio.run(main(*sys.argv[1:]))
    """
)


@pytest.mark.parametrize(
    ("kind", "keyring_in"), [("sqlite", "file"), ("postgresql", "file"), ("postgresql", "database")]
)
async def test_sessions_created_with_the_old_key_during_a_rotation_open_with_the_new_alone(
    kind: str, keyring_in: str, store_targets: StoreTargets, request: pytest.FixtureRequest
) -> None:
    target, new = store_targets.new(kind), generate_key()
    if keyring_in == "file":
        keyring = str(store_targets.options(f"{kind}-sealed")["keyring"])
    else:  # a PostgreSQL keyring: rotation and creates race in its tables
        keyring = str(request.getfixturevalue("keyring_database"))
        store_targets.options(f"{kind}-sealed")  # the directory the flag file goes in
    async with open_store(target, keys=OLD, keyring=keyring) as store:
        await store.create(SessionMeta(id="first"))
    rotated = store_targets.directory("rotated")
    creator = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CREATOR,
        target,
        keyring,
        OLD,
        str(rotated),
        stdout=asyncio.subprocess.PIPE,
    )
    assert creator.stdout is not None
    created = [(await creator.stdout.readline()).decode().strip() for _ in range(5)]
    async with await SqlStore.open(target, keys=[new, OLD], keyring=keyring) as rotating:
        await rotating.rotate_keys()  # while the creator goes on, with the old key alone
    rotated.touch()
    out, _ = await creator.communicate()
    said = out.decode().splitlines()
    assert said[-1].startswith("refused")
    assert "reopen it with the new key first" in said[-1]
    created += said[:-1]
    async with await SqlStore.open(target, keys=new, keyring=keyring) as store:
        held = {meta.id for meta in await store.list()}
        assert held == {"first", *created}
        for session_id in sorted(held):
            assert await store.load(session_id) == []  # each opens with the new key alone


async def test_keys_in_the_wrong_order_are_refused_naming_the_order(tmp_path: Path) -> None:
    db, new = str(tmp_path / "s.db"), generate_key()
    async with await SqlStore.open(db, keys=OLD) as store:
        await store.create(SessionMeta(id="s"))
    async with await SqlStore.open(db, keys=[OLD, new]) as store:  # the new key second
        with pytest.raises(EncryptionKeyError, match=r"never wrapped any.*newest first"):
            await store.rotate_keys()
    async with await SqlStore.open(db, keys=[new, OLD]) as store:
        assert await store.rotate_keys() == 2  # the session's key and the index key
        assert await store.rotate_keys() == 0  # done: nothing left
    async with await SqlStore.open(db, keys=[OLD, new]) as store:  # the old key first again
        with pytest.raises(EncryptionKeyError, match=r"retired by an earlier rotation.*newest"):
            await store.rotate_keys()
    third = generate_key()
    async with await SqlStore.open(db, keys=new) as store:  # a rotation to third killed at once:
        sealer = store.database.sealer  # third current, every key still under new
        assert sealer is not None
        assert sealer.keyring.set_master(MasterKeys(third).first, was=sealer.keyring.masters())
    async with await SqlStore.open(db, keys=[generate_key(), new]) as store:  # third missing
        with pytest.raises(EncryptionKeyError, match=r"current master key .* is not among"):
            await store.rotate_keys()
        assert await store.keyring_report() == {MasterKeys(new).first: 2}  # unchanged


async def test_keys_rotate_refuses_the_wrong_order_and_says_why_when_nothing_is_left(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.cli.helpers import run

    db, new = str(tmp_path / "s.db"), generate_key()
    async with await SqlStore.open(db, keys=OLD) as store:
        await store.create(SessionMeta(id="s"))
    wrong, right = tmp_path / "wrong.key", tmp_path / "right.key"
    wrong.write_text(f"{OLD}\n{new}\n")
    right.write_text(f"{new}\n{OLD}\n")
    status, out, err = await asyncio.to_thread(
        run, capsys, "--db", db, "--key-file", str(wrong), "keys", "rotate"
    )
    assert status != 0
    assert "rewrapped" not in out
    assert "newest first" in err
    status, out, _ = await asyncio.to_thread(
        run, capsys, "--db", db, "--key-file", str(right), "keys", "rotate"
    )
    assert status == 0
    assert "2 data keys rewrapped" in out
    status, out, _ = await asyncio.to_thread(
        run, capsys, "--db", db, "--key-file", str(right), "keys", "rotate"
    )
    assert status == 0
    assert "0 data keys rewrapped under the first key given: every data key was already" in out
