"""A directory an earlier version wrote: its index of message ids (``.ids/``)
is no longer read or written, and the directory opens and reads as any; an
erase still removes the session's index with the session."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from sessionstore import CompactionEntry, JsonlStore, SessionMeta
from sessionstore.context import build_context
from sessionstore.testing.contract import message


def earlier_index(directory: Path, session_id: str, offsets: dict[str, int]) -> list[Path]:
    """The index files an earlier version kept for a session: a header (its
    format's magic, the file's device and inode, a digest of its header
    line), a 16-byte record per message (a hash of its id, its offset), a
    mark; and the column of each record's first 4 bytes."""
    session = directory / f"{session_id}.jsonl"
    status = session.stat()
    header_line = session.read_bytes().split(b"\n", 1)[0]
    header = struct.pack(
        "<19sQQ8s",
        b"sessionstore ids 1\n",
        status.st_dev,
        status.st_ino,
        hashlib.blake2b(header_line, digest_size=8).digest(),
    )
    records = b"".join(
        struct.pack("<8sq", hashlib.blake2b(entry_id.encode(), digest_size=8).digest(), offset)
        for entry_id, offset in offsets.items()
    )
    records += struct.pack("<8sq", b"\0" * 8, -1 - status.st_size)
    index = directory / ".ids" / session_id
    column = directory / ".ids" / ".firsts" / session_id
    column.parent.mkdir(parents=True)
    index.write_bytes(header + records)
    column.write_bytes(b"".join(records[at : at + 4] for at in range(0, len(records), 16)))
    return [index, column]


async def written(directory: Path) -> JsonlStore:
    """Session ``s``: messages, then a compaction keeping from ``k``."""
    store = JsonlStore(directory)
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message(f"e{n}", f"old {n}") for n in range(20)])
    await store.append_many("s", [message("k", "kept"), message("t", "tail")])
    await store.append("s", CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="k"))
    return store


async def test_a_session_with_an_earlier_index_of_ids_reads_and_appends_as_any(
    tmp_path: Path,
) -> None:
    await written(tmp_path)
    # An index that, were it believed, would put ``k`` where ``e3`` is.
    data = (tmp_path / "s.jsonl").read_bytes()
    files = earlier_index(tmp_path, "s", {"k": data.index(b'"id":"e3"')})
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files}
    store = JsonlStore(tmp_path)  # a new process
    assert await store.load_context("s") == build_context(await store.load("s"))
    await store.append("s", message("n", "new"))
    store.drop_caches()
    assert [m.text() for m in await store.load_context("s")][-3:] == ["kept", "tail", "new"]
    assert await store.integrity() == []
    after = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files}
    assert after == before  # left as it was: neither read nor written


async def test_an_erase_removes_the_session_index_an_earlier_version_wrote(
    tmp_path: Path,
) -> None:
    store = await written(tmp_path)
    await store.create(SessionMeta(id="other"))
    files = earlier_index(tmp_path, "s", {"k": 0})
    earlier_index_of_other = tmp_path / ".ids" / "other"
    earlier_index_of_other.write_bytes(b"sessionstore ids 1\n")
    await store.erase("s", reason="test")
    assert not any(path.exists() for path in files)
    assert earlier_index_of_other.exists()  # another session's: left
    assert not (tmp_path / "s.jsonl").exists()
