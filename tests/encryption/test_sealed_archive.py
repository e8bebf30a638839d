"""Encrypted archives (``export --encrypted``): nothing sealed in the store is
clear in the archive, it imports back whole with the master key, grows by
what it lacks, and an erase reaches it (docs/encryption.md)."""

from __future__ import annotations

import base64
import filecmp
import os
import shutil
from pathlib import Path

import pytest

from sessionstore import (
    ArchiveError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionStore,
    SqlStore,
    generate_key,
    open_store,
)
from sessionstore.archive import export_archive, import_archive
from tests.encryption.helpers import files_holding, fill, refused
from tests.kinds import TEST_KEYS, StoreTargets

pytest.importorskip("cryptography")

KEY = TEST_KEYS[0]


def same_trees(left: Path, right: Path) -> bool:
    """Whether two directories hold the same files, byte for byte."""
    compared = filecmp.dircmp(left, right)
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, compared.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(same_trees(left / name, right / name) for name in compared.common_dirs)


async def plain_export(store: SessionStore, dest: Path) -> Path:
    await export_archive(store, dest)
    return dest


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_an_encrypted_export_holds_nothing_sealed_and_imports_back_whole(
    kind: str, store_targets: StoreTargets, tmp_path: Path, marker: str
) -> None:
    archive = tmp_path / "archive"
    async with open_store(store_targets.new(kind), **store_targets.options(f"{kind}-sealed")) as s:
        await fill(s, marker)
        await s.fork("s1", meta=SessionMeta(id="f1", title=f"fork {marker}"))
        await s.append("f1", MessageEntry.new(Message.user(f"forked {marker}")))
        await s.set_head("main", "f1")
        await s.journal("agent").effects.once(lambda: f"sent {marker}", tool="send", key="k")
        report = await export_archive(s, archive, encrypted=True)
        original = await plain_export(s, tmp_path / "original")
    assert (report.sessions, report.journals, report.heads, report.titles) == (2, 1, 1, 1)
    assert files_holding(archive, marker) == []
    assert sorted(str(p.relative_to(archive)) for p in archive.rglob("*") if p.is_file()) == [
        "heads/main.jsonl",
        "journals/agent/session_effects.sealed",
        "journals/agent/session_journal.sealed",
        "keys.jsonl",
        "manifest.txt",
        "sessions/f1.sealed",
        "sessions/s1.sealed",
        "titles/s1.sealed",
    ]
    # Into a new sealed store with the master key (and a keyring of its own):
    # the data keys come from the archive's keys.jsonl.
    async with open_store(tmp_path / "restored.db", keys=KEY) as restored:
        await import_archive(restored, archive)
        assert same_trees(original, await plain_export(restored, tmp_path / "restored"))
    # Into a plain store, given the key.
    async with open_store(tmp_path / "plain.db") as plain:
        await import_archive(plain, archive, keys=KEY)
        assert same_trees(original, await plain_export(plain, tmp_path / "plain"))
        assert await plain.journal("agent").effects.result("k") == f"sent {marker}"


async def test_an_encrypted_export_grows_by_what_it_lacks(tmp_path: Path, marker: str) -> None:
    archive, file = tmp_path / "archive", tmp_path / "archive" / "sessions" / "s1.sealed"
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        await fill(store, marker)
        await export_archive(store, archive, encrypted=True)
        first = file.read_bytes()
        again = await export_archive(store, archive, encrypted=True)
        assert (again.entries, again.bytes, file.read_bytes()) == (0, 0, first)
        await store.append("s1", MessageEntry.new(Message.user(f"more {marker}")))
        grown = await export_archive(store, archive, encrypted=True)
        assert grown.entries == 1
        assert file.read_bytes().startswith(first)
        assert file.read_bytes().count(b"\n") == first.count(b"\n") + 1
    async with open_store(tmp_path / "back.db") as back:
        await import_archive(back, archive, keys=KEY)
        assert marker in (await back.load("s1"))[-1].message.text()  # type: ignore[union-attr]


async def test_a_changed_or_moved_line_is_refused_naming_it(tmp_path: Path, marker: str) -> None:
    archive = tmp_path / "archive"
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        await fill(store, marker)
        await store.create(SessionMeta(id="other"))
        await export_archive(store, archive, encrypted=True)
    s1, other = archive / "sessions" / "s1.sealed", archive / "sessions" / "other.sealed"
    lines = s1.read_bytes().splitlines(keepends=True)
    # Two lines swapped, and the other session's header put in place of s1's.
    s1.write_bytes(lines[0] + lines[2] + lines[1] + b"".join(lines[3:]))
    other.write_bytes(lines[0])
    changed = bytearray(base64.b64decode(lines[3]))
    changed[-1] ^= 1
    (archive / "titles" / "s1.sealed").write_bytes(base64.b64encode(bytes(changed)) + b"\n")
    async with open_store(tmp_path / "back.db") as back:
        with pytest.raises(ArchiveError) as raised:
            await import_archive(back, archive, keys=KEY)
        assert await back.list() == []
    reasons = {
        (str(Path(issue.file).relative_to(archive)), issue.line): issue.reason
        for issue in refused(raised.value)
    }
    assert set(reasons) == {
        ("sessions/s1.sealed", 2),  # line 3's, moved up
        ("sessions/other.sealed", 1),  # s1's header
        ("titles/s1.sealed", 1),  # changed
    }
    for reason in reasons.values():
        assert reason.startswith("does not open: its authentication tag does not match")


async def test_a_sealed_archive_without_its_key_is_refused_file_by_file(
    tmp_path: Path, marker: str
) -> None:
    archive = tmp_path / "archive"
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        await fill(store, marker)
        await export_archive(store, archive, encrypted=True)
    async with open_store(tmp_path / "plain.db") as plain:
        with pytest.raises(ArchiveError, match="give the master key that sealed it"):
            await import_archive(plain, archive)
        with pytest.raises(ArchiveError, match="not by a key given"):
            await import_archive(plain, archive, keys=generate_key())
        assert await plain.list() == []
        with pytest.raises(ArchiveError, match="needs an encrypted store"):
            await export_archive(plain, tmp_path / "other", encrypted=True)


async def test_one_session_is_never_in_an_archive_both_plain_and_sealed(
    tmp_path: Path, marker: str
) -> None:
    archive = tmp_path / "archive"
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        await fill(store, marker)
        await export_archive(store, archive)
        with pytest.raises(ArchiveError) as raised:
            await export_archive(store, archive, encrypted=True)
    reasons = {issue.reason for issue in refused(raised.value)}
    assert any("holds this session plain (s1.jsonl)" in reason for reason in reasons)
    assert not (archive / "sessions" / "s1.sealed").exists()


async def test_an_erase_reaches_an_encrypted_archive_through_the_keyring(
    tmp_path: Path,
) -> None:
    """The archive opens with the keys of its keys.jsonl, or the store's
    keyring. Kept apart from it (or its master key dropped after a
    rotation), the archive gives back every session but the erased."""
    db, archive = tmp_path / "s.db", tmp_path / "archive"
    keyring = str(db) + ".keys"
    async with open_store(db, keys=KEY) as store:
        for session_id in ("kept", "gone"):
            await store.create(SessionMeta(id=session_id))
            await store.append(session_id, MessageEntry.new(Message.user(f"{session_id} text")))
        await export_archive(store, archive, encrypted=True)
        await store.erase("gone", reason="asked")
    copy = tmp_path / "copy"
    shutil.copytree(archive, copy)

    # The archive whole still gives back the erased session: its keys.jsonl
    # is a copy of the keyring taken before the erase.
    async with open_store(tmp_path / "a.db") as restored:
        await import_archive(restored, archive, keys=KEY)
        assert {meta.id for meta in await restored.list()} == {"kept", "gone"}

    # Without it, the current keyring opens the kept session only.
    os.unlink(copy / "keys.jsonl")
    async with open_store(tmp_path / "b.db") as restored:
        with pytest.raises(ArchiveError) as raised:
            await import_archive(restored, copy, keys=KEY, keyring=keyring)
        assert [meta.id for meta in await restored.list()] == ["kept"]
    (issue,) = refused(raised.value)
    assert Path(issue.file).name == "gone.sealed"
    assert "destroyed by an erase" in issue.reason

    # Rotated to a new master key and the old one dropped, the archive's
    # keys.jsonl no longer opens: only the keyring does.
    new = generate_key()
    async with open_store(db, keys=[new, KEY]) as store:
        assert isinstance(store, SqlStore)
        assert await store.rotate_keys() > 0
    async with open_store(db, keys=new) as store:
        with pytest.raises(ArchiveError) as raised:
            await import_archive(store, archive)
        assert [meta.id for meta in await store.list()] == ["kept"]
    (issue,) = refused(raised.value)
    assert Path(issue.file).name == "gone.sealed"
