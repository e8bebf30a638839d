"""An encrypted archive's manifest: truncation, a file removed or added and a
head changed without the keys are refused at import, nothing imported; an
archive exported again grows its manifest (docs/encryption.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sessionstore import ArchiveError, Message, MessageEntry, SessionMeta, open_store
from sessionstore.archive import export_archive, import_archive
from tests.encryption.helpers import refused
from tests.kinds import TEST_KEYS

pytest.importorskip("cryptography")

KEY = TEST_KEYS[0]


async def exported(tmp_path: Path) -> Path:
    """An encrypted archive of Alice's and Bob's sessions, each with its head."""
    archive = tmp_path / "archive"
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        for owner in ("alice", "bob"):
            await store.create(SessionMeta(id=f"{owner}-1", owner=owner))
            for n in range(3):
                await store.append(f"{owner}-1", MessageEntry.new(Message.user(f"{owner} {n}")))
            await store.set_head(owner, f"{owner}-1")
        await export_archive(store, archive, encrypted=True)
    return archive


async def refusal(tmp_path: Path, archive: Path) -> str:
    """Why importing ``archive`` into a new sealed store is refused; checks
    that nothing was imported."""
    async with open_store(tmp_path / f"into-{archive.name}.db", keys=KEY) as store:
        with pytest.raises(ArchiveError) as raised:
            await import_archive(store, archive)
        assert await store.list() == []
        assert await store.heads() == []
    return "\n".join(str(issue) for issue in refused(raised.value))


async def test_a_line_added_to_a_head_is_refused_naming_the_file_and_line(
    tmp_path: Path,
) -> None:
    archive = await exported(tmp_path)
    heads = archive / "heads" / "alice.jsonl"
    line = (archive / "heads" / "bob.jsonl").read_bytes()  # a head line, valid as such
    heads.write_bytes(heads.read_bytes() + line)
    why = await refusal(tmp_path, archive)
    assert "heads/alice.jsonl line 2: not in the manifest" in why


async def test_a_head_changed_in_place_or_added_is_refused(tmp_path: Path) -> None:
    archive = await exported(tmp_path)
    heads = archive / "heads" / "alice.jsonl"
    heads.write_bytes(heads.read_bytes().replace(b"alice-1", b"bob-1"))
    assert "heads/alice.jsonl: differs from the manifest" in await refusal(tmp_path, archive)
    shutil.copy(archive / "heads" / "bob.jsonl", archive / "heads" / "carol.jsonl")
    assert "heads/carol.jsonl: not in the manifest" in await refusal(tmp_path, archive)


async def test_last_lines_removed_from_a_sealed_file_are_refused(tmp_path: Path) -> None:
    archive = await exported(tmp_path)
    sealed = archive / "sessions" / "bob-1.sealed"
    lines = sealed.read_bytes().splitlines(keepends=True)
    sealed.write_bytes(b"".join(lines[:2]))
    why = await refusal(tmp_path, archive)
    assert "sessions/bob-1.sealed line 3: holds 2 line(s), the manifest 4" in why


async def test_a_whole_sealed_file_removed_is_refused(tmp_path: Path) -> None:
    archive = await exported(tmp_path)
    (archive / "sessions" / "bob-1.sealed").unlink()
    why = await refusal(tmp_path, archive)
    assert "sessions/bob-1.sealed: missing: the manifest lists it with 4 line(s)" in why


async def test_the_manifest_removed_or_forged_is_refused(tmp_path: Path) -> None:
    archive = await exported(tmp_path)
    manifest = archive / "manifest.txt"
    held = manifest.read_bytes()
    manifest.write_bytes(held.replace(b"4 ", b"2 ", 1))
    assert "manifest.txt: its MAC does not match" in await refusal(tmp_path, archive)
    manifest.unlink()
    assert "manifest.txt: missing" in await refusal(tmp_path, archive)


async def test_an_archive_exported_again_grows_its_manifest_and_imports(
    tmp_path: Path,
) -> None:
    archive = await exported(tmp_path)
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        await store.append("bob-1", MessageEntry.new(Message.user("bob later")))
        await store.create(SessionMeta(id="carol-1"))
        await export_archive(store, archive, encrypted=True, sessions=["bob-1", "carol-1"])
    manifest = (archive / "manifest.txt").read_text()
    assert "5 " in manifest
    assert "sessions/carol-1.sealed" in manifest
    assert "sessions/alice-1.sealed" in manifest  # kept from the run before
    async with open_store(tmp_path / "restored.db", keys=KEY) as restored:
        await import_archive(restored, archive)
        assert len(await restored.load("bob-1")) == 4
        assert await restored.head("alice") == "alice-1"


async def test_an_archive_exported_before_manifests_gains_one_when_exported_again(
    tmp_path: Path,
) -> None:
    archive = await exported(tmp_path)
    (archive / "manifest.txt").unlink()  # as an archive exported before manifests
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        await export_archive(store, archive, encrypted=True)
    async with open_store(tmp_path / "restored.db", keys=KEY) as restored:
        await import_archive(restored, archive)
        assert await restored.head("bob") == "bob-1"


async def test_an_export_refuses_a_manifest_changed_without_the_keys(tmp_path: Path) -> None:
    archive = await exported(tmp_path)
    manifest = archive / "manifest.txt"
    manifest.write_bytes(manifest.read_bytes().replace(b"4 ", b"9 ", 1))
    async with open_store(tmp_path / "s.db", keys=KEY) as store:
        with pytest.raises(ArchiveError, match=r"manifest\.txt: its MAC does not match"):
            await export_archive(store, archive, encrypted=True)
