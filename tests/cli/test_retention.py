"""``sessionstore expire``, and ``retire`` given a policy's options: the dry run's
table and total, asking first, what a run prints, and its exit status."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.testing.common import message
from sessionstore.timestamps import Timestamp
from tests.cli.helpers import ANSI, COMMAND, environment, on_terminal, run

OLD = "2020-01-01T00:00:00Z"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def fill(target: str) -> None:
    """alice's ``a1`` (2020-01) and ``a2`` (2020-02), bob's ``b1`` (tagged
    scratch), all idle since 2020; ``fresh``, written to now."""

    async def go() -> None:
        async with await open_store(target) as store:
            for session_id, owner, month, tags in (
                ("a1", "alice", 1, ()),
                ("a2", "alice", 2, ()),
                ("b1", "bob", 3, ("scratch",)),
            ):
                created = f"2020-0{month}-01T00:00:00Z"
                meta = SessionMeta(id=session_id, owner=owner, created_at=created, tags=tags)
                await store.create(meta)
                await store.append(session_id, message(f"{session_id}-1", "hello", created))
            await store.create(SessionMeta(id="fresh"))
            await store.append("fresh", message("fresh-1", "now", str(Timestamp.now())))

    asyncio.run(go())


def ids(target: str) -> list[str]:
    async def go() -> list[str]:
        async with await open_store(target) as store:
            return sorted(meta.id for meta in await store.list())

    return asyncio.run(go())


@pytest.fixture
def db(target: str) -> str:
    fill(target)
    return target


def test_a_dry_run_lists_what_would_go_with_sizes_and_reasons_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(
        capsys, "--db", db, "expire", "--idle", "90d", "--keep-newest", "1", "--dry-run"
    )
    assert status == 0, err
    header, *rows, total = out.splitlines()
    assert header.split("\t") == [
        "session", "owner", "created", "last entry", "entries", "bytes", "reason"
    ]  # fmt: skip
    [row] = rows
    session, owner, created, last, entries, size, reason = row.split("\t")
    assert (session, owner, created, last, entries) == (
        "a1", "alice", "2020-01-01 00:00:00", "2020-01-01 00:00:00", "1"
    )  # fmt: skip
    assert int(size) > 0
    assert reason.startswith("idle ")
    assert reason.endswith(", not among the newest 1")
    assert total == f"would expire 1 session of 4 (1 entry, {size} bytes); left 2"
    assert "left a2: among the newest 1 of alice's sessions; kept" in err
    assert "left b1: among the newest 1 of bob's sessions; kept" in err
    assert ids(db) == ["a1", "a2", "b1", "fresh"]
    assert run(capsys, "--db", db, "erasures")[1].count("\n") == 1  # the header alone


def test_expire_with_yes_erases_prints_each_and_a_rerun_does_nothing(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    args = ["--db", db, "expire", "--owner", "alice", "--created-before", "2020-02-01", "--yes"]
    status, out, err = run(capsys, *args)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "expired a1"
    assert lines[1].startswith("expired 1 session (")
    assert lines[1].endswith("); already gone 0; left 0")
    assert ids(db) == ["a2", "b1", "fresh"]
    status, out, _ = run(capsys, "--db", db, "erasures")
    assert "expired by policy: created before 2020-02-01T00:00:00Z, owner alice" in out
    status, out, err = run(capsys, *args)
    assert (status, out, err) == (0, "expired 0 sessions (0 bytes); already gone 0; left 0\n", "")


def test_a_tag_and_a_reason_of_ones_own(capsys: pytest.CaptureFixture[str], db: str) -> None:
    status, out, _ = run(
        capsys, "--db", db, "expire", "--tag", "scratch", "--reason", "ticket 9", "--yes"
    )
    assert status == 0
    assert out.splitlines()[0] == "expired b1"
    assert "\tticket 9\t" in run(capsys, "--db", db, "erasures")[1]


def test_from_a_script_without_yes_it_is_refused_and_nothing_changes(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    status, out, err = run(capsys, "--db", db, "expire", "--idle", "90d")
    assert (status, out) == (1, "")
    assert "expire asks on a terminal first; pass --yes to expire from a script" in err
    assert ids(db) == ["a1", "a2", "b1", "fresh"]


def test_on_a_terminal_it_shows_the_plan_and_asks(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    status, out, err = run(capsys, "--db", db, "expire", "--idle", "90d")
    assert status == 1
    assert "would expire 3 sessions of 4" in out
    assert "expire 3 sessions (" in err
    assert "for good? [y/N]" in err
    assert "not confirmed: 3 sessions left as they are" in err
    assert ids(db) == ["a1", "a2", "b1", "fresh"]
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    status, out, _ = run(capsys, "--db", db, "expire", "--idle", "90d")
    assert status == 0
    assert ids(db) == ["fresh"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["expire", "--yes"], "a policy needs a filter (--idle, --created-before, --owner"),
        (["expire", "--owner", "a", "--reason", " ", "--yes"], "--reason must say why"),
        (["expire", "--owner", "", "--yes"], "--owner takes a non-empty string, not ''"),
        (
            ["retire", "--to", "x", "--session", "a1", "--owner", "alice"],
            "--session names the sessions to retire: it takes no policy option",
        ),
    ],
)
def test_a_policy_that_means_nothing_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], db: str, args: list[str], says: str
) -> None:
    status, out, err = run(capsys, "--db", db, *args)
    assert (status, out) == (1, "")
    assert says in err
    assert err.count("\n") == 1
    assert ids(db) == ["a1", "a2", "b1", "fresh"]


def test_a_date_that_is_none_is_a_usage_error_as_an_age_that_is_none(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    for option, says in (("--created-before", "is not an RFC 3339 time: 'soon'"), ("--idle", "")):
        with pytest.raises(SystemExit) as exited:
            run(capsys, "--db", db, "expire", option, "soon", "--yes")
        out, err = capsys.readouterr()
        assert (exited.value.code, out) == (2, "")
        assert f"argument {option}" in err
        assert says in err
    assert ids(db) == ["a1", "a2", "b1", "fresh"]  # nothing erased


def test_keep_newest_takes_a_count_of_one_or_more(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", db, "expire", "--keep-newest", "0")
    assert exited.value.code == 2


def test_retire_with_a_policy_option_archives_what_the_policy_chooses(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    args = ["--db", db, "retire", "--to", str(archive), "--idle", "90d", "--owner", "alice"]
    status, out, err = run(capsys, *args, "--dry-run")
    assert status == 0, err
    assert out.splitlines()[-1].startswith("would retire 2 sessions of 4")
    assert not archive.exists()
    status, out, err = run(capsys, *args)
    assert (status, err) == (0, "")
    assert out.splitlines()[:2] == ["retired a1", "retired a2"]
    assert f"to {archive.absolute()}; already gone 0; left 0" in out
    assert sorted(p.name for p in (archive / "sessions").iterdir()) == ["a1.jsonl", "a2.jsonl"]
    assert ids(db) == ["b1", "fresh"]


def test_retire_given_an_empty_owner_is_refused_not_run_as_a_plain_retire(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    args = ["--db", db, "retire", "--to", str(archive), "--idle", "90d", "--owner", "", "--yes"]
    status, out, err = run(capsys, *args)
    assert (status, out) == (1, "")
    assert "--owner takes a non-empty string, not ''" in err
    assert not archive.exists()
    assert ids(db) == ["a1", "a2", "b1", "fresh"]


def test_a_dry_run_on_a_terminal_is_a_table(db: str) -> None:
    done = on_terminal("--db", db, "expire", "--idle", "90d", "--dry-run", columns=120)
    assert done.returncode == 0, done.stderr
    assert "expire: idle 90d" in done.stdout
    for column in ("session", "owner", "created", "last entry", "entries", "bytes", "reason"):
        assert column in done.stdout
    assert "would expire 3 sessions of 4" in done.stdout


@pytest.mark.parametrize("verb", ["expire", "retire"])
def test_a_run_on_a_terminal_shows_its_progress(db: str, tmp_path: Path, verb: str) -> None:
    where = ["--to", str(tmp_path / "archive")] if verb == "retire" else ["--reason", "test"]
    done = on_terminal("--db", db, verb, "--idle", "90d", "--owner", "alice", "--yes", *where)
    assert done.returncode == 0, done.stderr
    assert f"{verb[:-1]}ing" in done.stderr
    assert "100%" in done.stderr
    assert ids(db) == ["b1", "fresh"]


def test_an_interrupted_run_says_how_far_it_got_and_a_rerun_finishes(tmp_path: Path) -> None:
    target = str(tmp_path / "many.db")

    async def many() -> None:
        async with await open_store(target) as store:
            for n in range(1500):
                await store.create(SessionMeta(id=f"s{n}", created_at=OLD))
                await store.append(f"s{n}", message(f"s{n}-1", "hello", OLD))

    asyncio.run(many())
    args = [*COMMAND, "--db", target, "expire", "--idle", "90d", "--yes"]
    with subprocess.Popen(args, stderr=subprocess.PIPE, env=environment(FORCE_COLOR="1")) as cut:
        assert cut.stderr is not None
        seen = b""
        while b"expiring" not in seen:  # the first erasures are under way
            chunk = os.read(cut.stderr.fileno(), 4096)
            assert chunk, "the run ended before it showed its progress"
            seen += chunk
        cut.send_signal(signal.SIGINT)
        seen += cut.stderr.read()
    assert cut.returncode == 130
    said = ANSI.sub("", seen.decode())
    assert "of 1500 sessions before the interrupt" in said
    assert "the same command again finishes the rest" in said
    assert 0 < len(ids(target)) < 1500

    done = subprocess.run(args, capture_output=True, text=True, env=environment(), check=False)
    assert done.returncode == 0, done.stderr
    assert ids(target) == []
