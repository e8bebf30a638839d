"""Read commands leave a directory as it was: an archive's ``sessions/`` (or
any JSONL store) read by ``ls``, ``show``, ``verify`` and ``search`` gets no
cache written into it, and a listing's later pages still work, in another
process, by key."""

import asyncio
import os
from pathlib import Path

import pytest

from sessionstore import (
    CompactionEntry,
    ConfigurationError,
    JsonlStore,
    Message,
    MessageEntry,
    SessionMeta,
)
from sessionstore.archive import export_archive
from sessionstore.backends.jsonl import hints as jsonl_hints
from sessionstore.backends.jsonl.listing import LISTINGS
from sessionstore.testing.common import message
from tests.cli.helpers import run

Snapshot = dict[str, tuple[int, int, int]]


def snapshot(root: Path) -> Snapshot:
    """Every name under ``root``, with its size, modification time and mode."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in (*names, *files):
            status = os.lstat(os.path.join(directory, name))
            where = os.path.relpath(os.path.join(directory, name), root)
            found[where] = (status.st_size, status.st_mtime_ns, status.st_mode)
    status = os.lstat(root)
    found["."] = (status.st_size, status.st_mtime_ns, status.st_mode)
    return found


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """An archive's ``sessions/``, of a store with titles, a fork, a head and
    an erasure."""

    async def make() -> None:
        store = JsonlStore(tmp_path / "store")
        for n in range(4):
            await store.create(SessionMeta(id=f"s{n}", title=f"title {n}"))
            await store.append(f"s{n}", message(f"m{n}", f"hello {n}"))
        await store.set_title("s0", "renamed")
        await store.fork("s0", meta=SessionMeta(id="fork"))
        await store.set_head("main", "s0")
        await store.create(SessionMeta(id="gone"))
        await store.erase("gone", reason="asked")
        await export_archive(store, tmp_path / "archive")

    asyncio.run(make())
    return tmp_path / "archive" / "sessions"


@pytest.mark.parametrize(
    "command",
    [
        ["ls"],
        ["ls", "--tree"],
        ["ls", "--order", "created", "--json"],
        ["show", "s0"],
        ["show", "fork", "--json"],
        ["verify"],
        ["search", "hello"],
    ],
)
def test_a_read_command_leaves_the_directory_as_it_was(
    capsys: pytest.CaptureFixture[str], sessions: Path, command: list[str]
) -> None:
    before = snapshot(sessions)
    status, _, err = run(capsys, "--db", str(sessions), *command)
    assert status == 0, err
    assert snapshot(sessions) == before


def test_ls_pages_on_in_another_call_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], sessions: Path
) -> None:
    before = snapshot(sessions)
    seen: list[str] = []
    args = ["ls", "--limit", "2"]
    while True:
        status, out, err = run(capsys, "--db", str(sessions), *args)
        assert status == 0, err
        seen += [line.split("\t")[0] for line in out.splitlines()[1:]]
        if "next page:" not in err:
            break
        args = ["ls", "--limit", "2", "--after", err.split("--after")[1].split()[0]]
    assert sorted(seen) == ["fork", "s0", "s1", "s2", "s3"]
    assert len(seen) == len(set(seen))
    assert snapshot(sessions) == before


@pytest.mark.parametrize("order", ["last_activity", "created"])
async def test_pages_by_key_give_each_session_once_in_the_kept_order(
    tmp_path: Path, order: str
) -> None:
    writer = JsonlStore(tmp_path)
    for n in range(7):
        await writer.create(SessionMeta(id=f"s{n}", created_at=f"2020-01-0{n % 3 + 1}T00:00:00Z"))
    whole = [s.meta.id for s in await writer.summaries(order=order, limit=None)]  # type: ignore[arg-type]
    paged: list[str] = []
    after = None
    while True:
        reader = JsonlStore(tmp_path, write_caches=False)  # each page another process's
        page = await reader.summaries(order=order, limit=3, after=after)  # type: ignore[arg-type]
        if not page:
            break
        paged += [s.meta.id for s in page]
        after = page[-1].cursor
    assert paged == whole


async def test_a_listing_without_caches_keeps_no_order(tmp_path: Path) -> None:
    await JsonlStore(tmp_path).create(SessionMeta(id="s"))
    reader = JsonlStore(tmp_path, write_caches=False)
    assert [s.meta.id for s in await reader.summaries()] == ["s"]
    assert not (tmp_path / LISTINGS).exists()


async def test_a_context_without_caches_writes_no_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_hints, "HINT_FROM", 0)  # a hint for any search
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    await store.append_many(
        "s",
        [
            MessageEntry(id="k", timestamp="t", message=Message.user("kept")),
            CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="k"),
        ],
    )
    reader = JsonlStore(tmp_path, write_caches=False)
    assert [m.text() for m in await reader.load_context("s")][-1] == "kept"
    assert not (tmp_path / jsonl_hints.HINTS).exists()
    await JsonlStore(tmp_path).load_context("s")  # a store that keeps caches does write one
    assert (tmp_path / jsonl_hints.HINTS / "s").exists()


async def test_write_caches_takes_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="write_caches takes True or False"):
        JsonlStore(tmp_path, write_caches="no")  # type: ignore[arg-type]
