"""Named heads in the archive: ``heads/<name>.jsonl``, every position a line.

"The current session of conversation X" survives an export and an import,
with every earlier position and the time of each move: a head is
append-only like a session, so its file travels the way a session file
does (incremental, checked as a prefix, refused when it differs).
"""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import (
    ArchiveError,
    HeadMove,
    MemoryStore,
    SessionMeta,
    SessionStore,
    encode_line,
    open_store,
)
from sessionstore.archive import ArchiveReport, export_archive, import_archive
from sessionstore.testing.common import UNUSUAL_VALID_IDS
from tests.archive.helpers import tree
from tests.forks import fill_forks
from tests.kinds import STORE_KINDS, StoreTargets


@pytest.fixture(params=STORE_KINDS)
async def store(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(request.param)) as opened:
        yield opened


async def fill_heads(store: SessionStore) -> None:
    """The forks of `fill_forks`, and two heads moved among them."""
    await fill_forks(store)
    for session_id in ("root", "middle", "deep", "middle"):
        await store.set_head("chat", session_id)
    await store.set_head("sub-agent", "from-imported")


def head_file(archive: Path, name: str) -> Path:
    return archive / "heads" / f"{name}.jsonl"


def refusals(report: object) -> dict[str, tuple[int | None, str]]:
    assert isinstance(report, ArchiveReport)
    return {Path(issue.file).name: (issue.line, issue.reason) for issue in report.refused}


@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_heads_travel_with_every_position_and_its_time(
    tmp_path: Path, kind: str, store_targets: StoreTargets
) -> None:
    async with open_store(store_targets.new(kind)) as first:
        await fill_heads(first)
        report = await export_archive(first, tmp_path / "one")
        histories = {name: await first.head_history(name) for name in ("chat", "sub-agent")}
    assert report.heads == 2
    async with open_store(store_targets.new(kind)) as second:
        assert (await import_archive(second, tmp_path / "one")).heads == 2
        assert sorted(await second.heads()) == ["chat", "sub-agent"]
        for name, moves in histories.items():
            assert await second.head_history(name) == moves  # their times, not the import's
        assert await second.head("chat") == "middle"
        await export_archive(second, tmp_path / "two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


async def test_a_head_file_holds_each_position_a_line_oldest_first(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_heads(store)
    await export_archive(store, tmp_path / "out")
    moves = await store.head_history("chat")
    expected = b"".join(map(encode_line, moves))
    assert head_file(tmp_path / "out", "chat").read_bytes() == expected
    assert [move.session_id for move in moves] == ["root", "middle", "deep", "middle"]


async def test_importing_heads_again_changes_nothing_and_a_longer_file_adds_its_new_moves(
    store: SessionStore, tmp_path: Path
) -> None:
    async with open_store("memory://") as elsewhere:
        await fill_heads(elsewhere)
        await export_archive(elsewhere, tmp_path / "one")
        await elsewhere.set_head("chat", "deeper")
        await export_archive(elsewhere, tmp_path / "two")
        expected = await elsewhere.head_history("chat")
    await import_archive(store, tmp_path / "one")
    await import_archive(store, tmp_path / "one")
    assert len(await store.head_history("chat")) == 4
    await import_archive(store, tmp_path / "two")
    assert await store.head_history("chat") == expected
    await import_archive(store, tmp_path / "one")  # an older, shorter copy: nothing to add
    assert await store.head_history("chat") == expected


async def test_a_head_that_differs_from_the_stored_one_is_refused_and_left(
    store: SessionStore, tmp_path: Path
) -> None:
    async with open_store("memory://") as elsewhere:
        await fill_heads(elsewhere)
        await export_archive(elsewhere, tmp_path / "one")
        await import_archive(store, tmp_path / "one")
        await elsewhere.set_head("chat", "deeper")  # the two stores part ways
        await elsewhere.set_head("sub-agent", "root")
        await export_archive(elsewhere, tmp_path / "two")
    await store.set_head("chat", "root")
    mine = await store.head_history("chat")
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, tmp_path / "two")
    assert refusals(caught.value.report) == {"chat.jsonl": (5, "differs from the stored head")}
    assert await store.head_history("chat") == mine
    assert await store.head("sub-agent") == "root"  # the other head went on


async def test_a_head_that_named_an_erased_session_travels_whole(
    store: SessionStore, tmp_path: Path
) -> None:
    # A head moved to a session later erased (or retired) keeps that move.
    await store.create(SessionMeta(id="here"))
    gone = await store.create(SessionMeta(id="gone"))
    await store.set_head("chat", "here")
    await store.set_head("chat", gone)
    await store.erase(gone, reason="asked")
    history = await store.head_history("chat")
    await export_archive(store, tmp_path / "archive")
    target = await open_store("memory://")
    await import_archive(target, tmp_path / "archive")
    assert await target.head_history("chat") == history


async def test_a_move_naming_a_session_in_neither_store_nor_archive_is_kept(
    store: SessionStore, tmp_path: Path
) -> None:
    # A head's moves are its history: one naming a session gone from both
    # (erased in a store whose archive this is, or never kept) is imported
    # as written, with the moves around it, and exports back the same.
    await store.create(SessionMeta(id="here"))
    moves = [
        HeadMove(session_id="here", at="t0"),
        HeadMove(session_id="nowhere", at="t1"),
        HeadMove(session_id="here", at="t2"),
    ]
    head_file(tmp_path / "archive", "chat").parent.mkdir(parents=True)
    head_file(tmp_path / "archive", "chat").write_bytes(b"".join(map(encode_line, moves)))
    report = await import_archive(store, tmp_path / "archive")
    assert (report.heads, report.refused) == (1, [])
    assert await store.head_history("chat") == moves
    assert await store.head("chat") == "here"
    await export_archive(store, tmp_path / "again")
    assert (
        head_file(tmp_path / "again", "chat").read_bytes()
        == head_file(tmp_path / "archive", "chat").read_bytes()
    )


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"session_id": "here", "at": "t"}', "canonical"),
        (b'{"at":"t","session_id":"here"}', "canonical"),
        (b'{"session_id":"here","at":"t","by":"someone"}', "canonical"),
        (b'{"session_id":"here","at":"t"}\r', "canonical"),
        (b'{"session_id":"here"}', "head move"),
        (b"not json", "JSON"),
    ],
)
async def test_a_head_line_not_as_export_writes_it_is_refused_with_its_line(
    tmp_path: Path, line: bytes, why: str
) -> None:
    store = MemoryStore()  # the archive's rule, whatever the store
    await store.create(SessionMeta(id="here"))
    head_file(tmp_path, "chat").parent.mkdir()
    first = encode_line(HeadMove(session_id="here", at="t0"))
    head_file(tmp_path, "chat").write_bytes(first + line + b"\n")
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, tmp_path)
    number, reason = refusals(caught.value.report)["chat.jsonl"]
    assert number == 2
    assert why in reason
    assert await store.heads() == []


async def test_incremental_export_adds_new_positions_and_refuses_a_file_that_differs(
    store: SessionStore, tmp_path: Path
) -> None:
    await fill_heads(store)
    out = tmp_path / "out"
    await export_archive(store, out)
    moved = await store.set_head("chat", "at-first")
    before = head_file(out, "chat").read_bytes()
    await export_archive(store, out)
    assert head_file(out, "chat").read_bytes() == before + encode_line(moved)
    stale = head_file(out, "sub-agent")
    stale.write_bytes(stale.read_bytes().replace(b"from-imported", b"root"))
    kept = tree(out)
    with pytest.raises(ArchiveError) as caught:
        await export_archive(store, out)
    assert refusals(caught.value.report) == {
        "sub-agent.jsonl": (1, "differs from the stored head; not overwritten")
    }
    assert tree(out) == kept


async def test_export_of_chosen_heads_only(store: SessionStore, tmp_path: Path) -> None:
    await fill_heads(store)
    report = await export_archive(store, tmp_path / "heads", heads=["chat"])
    assert (report.sessions, report.journals, report.heads) == (0, 0, 1)
    assert list(tree(tmp_path / "heads")) == ["heads/chat.jsonl"]
    await export_archive(store, tmp_path / "sessions", sessions=["middle"])
    assert list(tree(tmp_path / "sessions")) == ["sessions/middle.jsonl"]


async def test_what_stands_in_heads_and_is_no_head_file_is_named_skipped(
    store: SessionStore, tmp_path: Path
) -> None:
    await store.create(SessionMeta(id="here"))
    heads = tmp_path / "heads"
    (heads / "a-directory.jsonl").mkdir(parents=True)
    (heads / ".chat.jsonl.tmp-1").write_bytes(b"")
    move = encode_line(HeadMove(session_id="here", at="t"))
    (heads / "chat.jsonl").write_bytes(move + move[:10])  # a torn last line
    report = await import_archive(store, tmp_path)
    assert sorted((Path(i.file).name, i.reason) for i in report.skipped) == [
        (".chat.jsonl.tmp-1", "a dot-named file (an unfinished export's temporary?)"),
        ("a-directory.jsonl", "a directory, not a head file"),
    ]
    assert [(Path(i.file).name, i.line) for i in report.warnings] == [("chat.jsonl", 2)]
    assert await store.head_history("chat") == [HeadMove(session_id="here", at="t")]


async def test_heads_and_sessions_with_unusual_names_travel(
    store: SessionStore, tmp_path: Path
) -> None:
    for name in UNUSUAL_VALID_IDS:
        await store.create(SessionMeta(id=name))
        await store.set_head(name, name)
    await export_archive(store, tmp_path / "one")
    async with open_store("memory://") as other:
        await import_archive(other, tmp_path / "one")
        for name in UNUSUAL_VALID_IDS:
            assert await other.head_history(name) == await store.head_history(name)
        await export_archive(other, tmp_path / "two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
