"""``export`` and ``retire`` run again into the archive an earlier run wrote:
titles, heads and erasures are part of an archive, and the run extends it."""

import asyncio
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.testing.common import message
from tests.cli.helpers import run
from tests.kinds import PERSISTENT_KINDS, StoreTargets

OLD = "2020-01-01T00:00:00Z"


@pytest.fixture(params=PERSISTENT_KINDS)
def target(request: pytest.FixtureRequest, store_targets: StoreTargets) -> str:
    return store_targets.new(str(request.param))


def fill(target: str, *ids: str) -> None:
    """Old sessions ``ids``, each titled, with an entry; a head on the first;
    and a session made and erased (an erasure record)."""

    async def go() -> None:
        async with await open_store(target) as store:
            for session_id in ids:
                await store.create(SessionMeta(id=session_id, created_at=OLD))
                await store.append(session_id, message(f"{session_id}-1", "hello", OLD))
                await store.set_title(session_id, f"about {session_id}")
            await store.set_head("main", ids[0])
            gone = f"gone-{ids[0]}"
            await store.create(SessionMeta(id=gone, created_at=OLD))
            await store.erase(gone, reason="asked")

    asyncio.run(go())


def titles_of(archive: Path) -> list[str]:
    return sorted(path.name for path in (archive / "titles").iterdir())


def test_a_second_export_into_an_archive_with_titles_extends_it(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    fill(target, "a")
    assert run(capsys, "--db", target, "export", str(archive))[0] == 0
    assert titles_of(archive) == ["a.jsonl"]
    fill(target, "b")
    status, out, err = run(capsys, "--db", target, "export", str(archive))
    assert status == 0, err
    assert "exported 2 sessions (1 new entry" in out  # b's; a's was there
    assert titles_of(archive) == ["a.jsonl", "b.jsonl"]


def test_a_second_retire_into_an_archive_with_titles_retires_the_new_ones(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    fill(target, "a")
    first = run(
        capsys, "--db", target, "retire", "--to", str(archive), "--before", "2021-01-01", "--yes"
    )
    assert first[0] == 0, first[2]
    fill(target, "b")
    status, out, err = run(
        capsys, "--db", target, "retire", "--to", str(archive), "--before", "2021-01-01", "--yes"
    )
    assert status == 0, err
    assert out.splitlines()[0] == "retired b"
    assert titles_of(archive) == ["a.jsonl", "b.jsonl"]


@pytest.mark.parametrize("command", ["export", "retire"])
def test_a_foreign_directory_is_refused_naming_the_command_run(
    capsys: pytest.CaptureFixture[str], command: str, tmp_path: Path
) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    args = [str(tmp_path / "notes")] if command == "export" else ["--to", str(tmp_path / "notes")]
    extra = [] if command == "export" else ["--before", "2021-01-01"]
    status, _, err = run(capsys, "--db", "memory://", command, *args, *extra)
    assert status == 1
    assert f"cannot {command} to {tmp_path / 'notes'}: not empty and not an archive" in err
    assert "todo.txt" in err
