"""Archives of forked sessions: each exported file stands alone (SPEC section 7).

A fork exports as its whole history, the shared part included, byte for
byte what `raw_lines` gives, whatever its backend stores (a SQL fork holds
only a row pointing at its base). Imported, it is a session of its own.
"""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import SessionMeta, SessionStore, decode_meta, encode_line, open_store
from sessionstore.archive import export_archive, import_archive
from sessionstore.testing.common import message, raw
from tests.archive.helpers import tree
from tests.forks import FORKS, SESSIONS, fill_forks
from tests.kinds import STORE_KINDS, StoreTargets


@pytest.fixture(params=STORE_KINDS)
async def store(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(request.param)) as opened:
        yield opened


async def stored_file(store: SessionStore, session_id: str) -> bytes:
    """The session's file as `raw_lines` gives it."""
    return "".join(line + "\n" for line in await raw(store, session_id)).encode()


def file_lines(archive: Path, session_id: str) -> list[bytes]:
    return (archive / "sessions" / f"{session_id}.jsonl").read_bytes().splitlines(keepends=True)


async def test_each_fork_exports_as_its_whole_history_byte_for_byte(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_forks(store)
    report = await export_archive(store, tmp_path / "out")
    assert report.sessions == len(SESSIONS)
    assert sorted(tree(tmp_path / "out")) == sorted(f"sessions/{s}.jsonl" for s in SESSIONS)
    for session_id in SESSIONS:
        exported = (tmp_path / "out" / "sessions" / f"{session_id}.jsonl").read_bytes()
        assert exported == await stored_file(store, session_id), session_id


async def test_an_exported_fork_holds_its_source_s_lines_then_its_own(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_forks(store)
    out = tmp_path / "out"
    await export_archive(store, out)
    root, middle, deep = (file_lines(out, s) for s in ("root", "middle", "deep"))
    assert file_lines(out, "at-first")[1:] == [root[1], encode_line(message("a1", "edited"))]
    assert middle[1:5] == root[1:5]  # up to e3, past the compaction c1
    assert deep[1:] == [*middle[1:3], encode_line(message("d1", "retried"))]
    assert file_lines(out, "deeper")[1:4] == deep[1:]
    assert file_lines(out, "empty-fork")[1:] == []
    imported = file_lines(out, "imported")
    assert file_lines(out, "from-imported")[1:5] == imported[1:5]  # \r and escapes kept
    for fork, source in FORKS.items():
        assert decode_meta(file_lines(out, fork)[0]).parent_session == source


async def test_a_fork_imported_alone_is_a_session_of_its_own(
    store: SessionStore, tmp_path: Path
) -> None:
    async with open_store("memory://") as other:
        await fill_forks(other)
        await export_archive(other, tmp_path / "out", sessions=["deep"])
        expected = await other.load("deep")
    await import_archive(store, tmp_path / "out")  # without the sessions it came from
    assert await store.load("deep") == expected
    assert [(m.id, m.parent_session) for m in await store.list()] == [("deep", "middle")]
    await store.append("deep", message("d2", "goes on"))
    assert await store.load("deep") == [*expected, message("d2", "goes on")]
    assert await store.integrity() == []


async def test_an_imported_fork_keeps_its_history_when_its_source_goes_on(
    store: SessionStore, tmp_path: Path
) -> None:
    async with open_store("memory://") as other:
        await fill_forks(other)
        await export_archive(other, tmp_path / "out")
    await import_archive(store, tmp_path / "out")
    before = await stored_file(store, "middle")
    await store.append("root", message("e5", "later"))
    await store.fork("middle", meta=SessionMeta(id="late-fork"))
    assert await stored_file(store, "middle") == before
    assert (await store.load("late-fork")) == await store.load("middle")


async def test_incremental_export_gives_a_fork_only_its_new_entries(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_forks(store)
    out = tmp_path / "out"
    await export_archive(store, out)
    await store.append("middle", message("m2", "fork"))
    await store.append("root", message("e5", "source"))
    report = await export_archive(store, out)
    assert report.entries == 2
    for session_id in ("middle", "root", "deep"):
        exported = (out / "sessions" / f"{session_id}.jsonl").read_bytes()
        assert exported == await stored_file(store, session_id)


async def test_an_archive_extends_a_fork_whose_prefix_the_store_shares(
    store: SessionStore, tmp_path: Path
) -> None:
    # The store holds "middle" as a fork (on SQL, a row pointing at "root");
    # the archive's copy went on elsewhere: only the new entry is added.
    await fill_forks(store)
    await export_archive(store, tmp_path / "one")
    async with open_store("memory://") as elsewhere:
        await import_archive(elsewhere, tmp_path / "one")
        await elsewhere.append("middle", message("m2", "written elsewhere"))
        await export_archive(elsewhere, tmp_path / "two")
    report = await import_archive(store, tmp_path / "two")
    assert (report.sessions, report.entries) == (len(SESSIONS), 1)
    assert (await store.load("middle"))[-1] == message("m2", "written elsewhere")
    assert await store.integrity() == []
    await export_archive(store, tmp_path / "three")
    assert tree(tmp_path / "three") == tree(tmp_path / "two")


async def test_forks_past_a_page_of_rows_export_whole(store: SessionStore, tmp_path: Path) -> None:
    # Past the 2,000 rows a SQL store reads at a time, forked off that
    # boundary and inside an inherited part: every span is read whole.
    await store.create(SessionMeta(id="long"))
    await store.append_many("long", [message(f"e{n}", "x") for n in range(2_100)])
    await store.fork("long", at="e2049", meta=SessionMeta(id="fork"))
    await store.append_many("fork", [message(f"f{n}", "y") for n in range(50)])
    await store.fork("fork", at="f24", meta=SessionMeta(id="fork-of-fork"))
    await store.fork("fork", at="e1999", meta=SessionMeta(id="inside"))
    await export_archive(store, tmp_path / "one")
    for session_id, count in (("fork", 2_100), ("fork-of-fork", 2_075), ("inside", 2_000)):
        exported = (tmp_path / "one" / "sessions" / f"{session_id}.jsonl").read_bytes()
        assert exported == await stored_file(store, session_id)
        assert exported.count(b"\n") == count + 1
    async with open_store("memory://") as other:
        await import_archive(other, tmp_path / "one")
        await export_archive(other, tmp_path / "two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
