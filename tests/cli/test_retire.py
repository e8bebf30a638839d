"""``sessionstore retire``: old sessions into an archive, checked, then erased."""

import asyncio
import contextlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.testing.common import message
from tests.cli.helpers import run
from tests.kinds import PERSISTENT_KINDS, StoreTargets

OLD = "2020-01-01T00:00:00Z"
NEW = "2999-01-01T00:00:00Z"


def fill(target: str) -> dict[str, list[str]]:
    """Sessions ``old`` and ``new``, and ``kept`` (old, with a fork ``fork``
    that is new); every session's stored lines."""

    async def go() -> dict[str, list[str]]:
        async with await open_store(target) as store:
            for session_id, created in (("old", OLD), ("new", NEW), ("kept", OLD)):
                await store.create(SessionMeta(id=session_id, created_at=created))
                await store.append(session_id, message(f"{session_id}-1", "hello", OLD))
            await store.fork("kept", meta=SessionMeta(id="fork", created_at=NEW))
            return {m.id: [x async for x in store.raw_lines(m.id)] for m in await store.list()}

    return asyncio.run(go())


def stored(target: str) -> dict[str, list[str]]:
    async def go() -> dict[str, list[str]]:
        async with await open_store(target) as store:
            return {m.id: [x async for x in store.raw_lines(m.id)] for m in await store.list()}

    return asyncio.run(go())


@pytest.fixture(params=PERSISTENT_KINDS)
def target(request: pytest.FixtureRequest, store_targets: StoreTargets) -> str:
    return store_targets.new(str(request.param))


def test_retire_prints_what_it_retired_and_skipped_and_import_brings_it_back(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    before = fill(target)
    archive = str(tmp_path / "archive")
    status, out, err = run(
        capsys, "--db", target, "retire", "--to", archive, "--before", "2026-01-01"
    )
    assert status == 0, err
    assert out.splitlines()[0] == "retired old"
    assert "retired 1 session" in out
    assert "skipped kept: its fork(s) fork stay in the store" in " ".join(err.split())
    assert set(stored(target)) == {"new", "kept", "fork"}
    assert run(capsys, "--db", target, "import", archive)[0] == 0
    assert stored(target) == before


def test_an_archive_copy_that_differs_is_a_fault_and_exit_1(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    fill(target)
    (tmp_path / "archive" / "sessions").mkdir(parents=True)
    (tmp_path / "archive" / "sessions" / "old.jsonl").write_bytes(b'{"id":"old"}\n')
    archive = str(tmp_path / "archive")
    status, _, err = run(capsys, "--db", target, "retire", "--to", archive, "--session", "old")
    assert status == 1
    assert "fault: skipped old:" in err
    assert "old" in stored(target)


def test_retire_without_a_filter_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run(capsys, "--db", "memory://", "retire", "--to", str(tmp_path / "a"))
    assert status == 1
    assert "never retires everything" in err
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("idle", ["90", "3w", "-1d", "d"])
def test_idle_takes_days_or_hours(capsys: pytest.CaptureFixture[str], idle: str) -> None:
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", "memory://", "retire", "--to", "a", f"--idle={idle}")
    assert exited.value.code == 2
    assert "90d, 12h" in capsys.readouterr().err


def test_a_named_session_the_store_lacks_is_a_fault(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    archive = str(tmp_path / "a")
    status, out, err = run(capsys, "--db", "memory://", "retire", "--to", archive, "--session", "x")
    assert status == 1
    assert "fault: skipped x: no such session" in err
    assert "retired 0 sessions" in out


# ------------------------------------------------- a retire that would take everything


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("choice", [["--idle", "0d"], ["--before", "2999-12-31"]])
def test_a_retire_that_takes_every_session_asks_first(
    capsys: pytest.CaptureFixture[str],
    target: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    choice: list[str],
) -> None:
    before = fill(target)
    archive = str(tmp_path / "archive")
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: nobody to ask
    status, out, err = run(capsys, "--db", target, "retire", "--to", archive, *choice)
    assert (status, out) == (1, "")
    assert err == (
        f"sessionstore: error: retire would take every session of {target} (4): it asks on "
        "a terminal first; pass --yes to retire them all from a script\n"
    )
    assert stored(target) == before
    assert not Path(archive).exists()
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    status, out, err = run(capsys, "--db", target, "retire", "--to", archive, *choice)
    assert status == 1
    assert err.endswith("[y/N] sessionstore: error: not confirmed: 4 sessions left as they are\n")
    assert stored(target) == before
    status, out, err = run(capsys, "--db", target, "retire", "--to", archive, *choice, "--yes")
    assert (status, err) == (0, "")
    assert "retired 4 sessions" in out
    assert stored(target) == {}


def test_a_retire_that_leaves_some_sessions_or_names_them_does_not_ask(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    fill(target)
    archive = str(tmp_path / "archive")
    status, out, err = run(
        capsys, "--db", target, "retire", "--to", archive, "--before", "2021-01-01"
    )
    assert status == 0
    assert "retired 1 session" in out  # old; kept stays with its fork, which is new
    every = ["--session", "new", "--session", "kept", "--session", "fork"]
    status, out, err = run(capsys, "--db", target, "retire", "--to", archive, *every)
    assert (status, err) == (0, "")
    assert stored(target) == {}


def test_the_question_is_asked_before_the_progress_bar_starts(
    capsys: pytest.CaptureFixture[str],
    target: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a terminal the bar, once started, redraws its line: started before
    # the question, it wrote over "retire every session ...? [y/N]" as the
    # operator was to answer it.
    fill(target)
    answer = _Terminal("y\n")
    events: list[str] = []

    @contextlib.contextmanager
    def bar(description: str) -> Iterator[Callable[[int, int], None]]:
        events.append(f"bar {description}, {answer.tell()} characters answered")
        yield lambda done, total: events.append("progress")

    monkeypatch.setattr("sessionstore.cli.archives.progress_bar", bar)
    monkeypatch.setattr("sys.stdin", answer)
    archive = str(tmp_path / "archive")
    status, out, _ = run(capsys, "--db", target, "retire", "--to", archive, "--idle", "0d")
    assert status == 0
    assert "retired 4 sessions" in out
    assert events[:2] == ["bar retiring, 2 characters answered", "progress"]
