"""`JsonlStore(dir, read_only=True)`: reads that repair nothing and write
nothing, a crash's remnant skipped and named, every write refused."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sessionstore import ConfigurationError, JsonlStore, SessionMeta, StorageError, encode_line
from sessionstore.testing.common import message

TORN = b'{"type":"message","id":"e3'


async def written(directory: Path) -> JsonlStore:
    """A store holding session ``s`` of two messages (and a head, and a title)."""
    store = JsonlStore(directory)
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message("e1", "a"), message("e2", "b")])
    await store.set_head("main", "s")
    await store.set_title("s", "a title")
    return store


def tree(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory``: its bytes and modification time."""
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


async def test_a_torn_tail_is_skipped_by_every_read_and_left_in_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = (await written(tmp_path)).path("s")
    path.write_bytes(path.read_bytes() + TORN)
    before = tree(tmp_path)
    store = JsonlStore(tmp_path, read_only=True)
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert [entry.id for entry in await store.load("s")] == ["e1", "e2"]
        assert [m.text() for m in await store.load_context("s")] == ["a", "b"]
        assert len([line async for line in store.raw_lines("s")]) == 3
        assert b"".join([block async for block in store.raw_blocks("s")]).endswith(b"\n")
    assert tree(tmp_path) == before
    expected = (
        f"session 's': {len(TORN)} bytes after line 3 of {path} are a crash's remnant, "
        "skipped and left as they are"
    )
    assert expected in [record.getMessage() for record in caplog.records]


async def test_the_lines_of_a_batch_whose_writer_died_are_skipped_and_left(
    tmp_path: Path,
) -> None:
    path = (await written(tmp_path)).path("s")
    intact = path.read_bytes()
    note = tmp_path / ".batch" / path.name
    note.parent.mkdir(exist_ok=True)
    note.write_text(str(len(intact)))  # as a writer dying inside its batch's write leaves it
    path.write_bytes(intact + encode_line(message("e3", "c")))
    before = tree(tmp_path)
    store = JsonlStore(tmp_path, read_only=True)
    assert [entry.id for entry in await store.load("s")] == ["e1", "e2"]
    assert tree(tmp_path) == before
    assert await JsonlStore(tmp_path).load("s") == await store.load("s")  # a repair agrees


async def test_integrity_names_a_torn_tail_when_read_only(tmp_path: Path) -> None:
    path = (await written(tmp_path)).path("s")
    path.write_bytes(path.read_bytes() + TORN)
    faults = await JsonlStore(tmp_path, read_only=True).integrity()
    assert faults == [
        f"{path}: {len(TORN)} bytes after line 3 are a crash's remnant (left: read_only)"
    ]
    assert path.read_bytes().endswith(TORN)


async def test_integrity_names_nothing_for_whole_files(tmp_path: Path) -> None:
    await written(tmp_path)
    assert await JsonlStore(tmp_path, read_only=True).integrity() == []


async def test_listings_and_contexts_write_nothing_into_the_directory(tmp_path: Path) -> None:
    await written(tmp_path)
    before = tree(tmp_path)
    names = sorted(os.listdir(tmp_path))
    store = JsonlStore(tmp_path, read_only=True)
    page = await store.summaries(limit=1)
    assert [summary.id for summary in page] == ["s"]
    await store.load_context("s")
    assert await store.head_history("main")
    assert await store.titles("s")
    assert sorted(os.listdir(tmp_path)) == names
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "write",
    [
        "create",
        "append",
        "import_session",
        "import_blocks",
        "fork",
        "set_head",
        "import_head",
        "set_title",
        "import_titles",
        "erase",
    ],
)
async def test_every_write_is_refused_and_changes_nothing(tmp_path: Path, write: str) -> None:
    writable = await written(tmp_path)
    header = next(iter([line async for line in writable.raw_lines("s")]))
    moves, changes = await writable.head_history("main"), await writable.titles("s")
    before = tree(tmp_path)
    store = JsonlStore(tmp_path, read_only=True)

    async def nothing() -> AsyncIterator[Any]:
        return
        yield

    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "create": lambda: store.create(SessionMeta(id="t")),
        "append": lambda: store.append("s", message("e3", "c")),
        "import_session": lambda: store.import_session(header, nothing(), after=2),
        "import_blocks": lambda: store.import_blocks("s", nothing(), after=2),
        "fork": lambda: store.fork("s"),
        "set_head": lambda: store.set_head("main", "s"),
        "import_head": lambda: store.import_head("main", moves, after=0),
        "set_title": lambda: store.set_title("s", "another"),
        "import_titles": lambda: store.import_titles("s", changes, after=0),
        "erase": lambda: store.erase("s", reason="test"),
    }
    with pytest.raises(ConfigurationError, match=r"is open read_only: .* refused"):
        await calls[write]()
    assert tree(tmp_path) == before


def test_read_only_takes_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="read_only takes True or False"):
        JsonlStore(tmp_path, read_only="yes")  # type: ignore[arg-type]


async def linked_archive(tmp_path: Path) -> tuple[Path, Path]:
    """An archive whose ``sessions/`` holds ``inside``, a link to a file
    elsewhere in the archive, and ``out``, a link leading out of it."""
    archive, outside = tmp_path / "archive", tmp_path / "outside"
    real = JsonlStore(archive / "real")
    await real.create(SessionMeta(id="inside"))
    await real.append("inside", message("e1", "a"))
    await written(outside)
    sessions = archive / "sessions"
    sessions.mkdir()
    (sessions / "inside.jsonl").symlink_to(archive / "real" / "inside.jsonl")
    (sessions / "out.jsonl").symlink_to(outside / "s.jsonl")
    return archive, sessions


async def test_a_link_to_a_file_within_is_read_and_listed(tmp_path: Path) -> None:
    archive, sessions = await linked_archive(tmp_path)
    store = JsonlStore(sessions, read_only=True, links_within=archive)
    assert [entry.id for entry in await store.load("inside")] == ["e1"]
    assert [m.text() for m in await store.load_context("inside")] == ["a"]
    lines = [line async for line in store.raw_lines("inside")]
    assert lines == (archive / "real" / "inside.jsonl").read_text().splitlines()
    assert [meta.id for meta in await store.list()] == ["inside"]
    assert not any("inside" in fault for fault in await store.integrity())


async def test_a_link_leading_out_is_never_followed(tmp_path: Path) -> None:
    archive, sessions = await linked_archive(tmp_path)
    store = JsonlStore(sessions, read_only=True, links_within=archive)
    with pytest.raises(StorageError, match="symbolic link"):
        await store.load("out")
    faults = await store.integrity()
    out = str(sessions / "out.jsonl")
    assert any(out in fault and "symbolic link" in fault for fault in faults)


async def test_without_links_within_no_link_is_followed(tmp_path: Path) -> None:
    _, sessions = await linked_archive(tmp_path)
    with pytest.raises(StorageError, match="symbolic link"):
        await JsonlStore(sessions, read_only=True).load("inside")


def test_links_within_is_only_for_a_read_only_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="links_within is for a store opened read_only"):
        JsonlStore(tmp_path, links_within=tmp_path)
