"""The command line, end to end on temporary stores."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sessionstore import decode_entry, decode_meta, migrate
from sessionstore.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
FIXTURE = Path(__file__).parent / "data" / "archive"
COMMANDS = ["migrate", "ls", "show", "import", "export", "verify", "journal", "demo"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def session_ids(capsys: pytest.CaptureFixture[str], db: str) -> list[str]:
    status, out, _ = run(capsys, "--db", db, "ls")
    assert status == 0
    return [line.split("\t")[0] for line in out.splitlines()[1:]]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "sessions.db")


def test_the_parser_knows_exactly_the_documented_commands() -> None:
    parser = build_parser()
    choices = next(a.choices for a in parser._actions if a.dest == "command")
    assert choices is not None
    assert sorted(choices) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example_and_is_in_the_readme(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out
    assert f"sessionstore {command}" in out
    assert f"sessionstore {command}" in README


def test_demo_plays_a_conversation_and_round_trips_it(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "demo")
    assert status == 0, err
    assert "byte-identical" in out
    assert "[Conversation summary]" in out
    assert "2 interrupted sessions" in out
    assert len(session_ids(capsys, db)) == 1
    status, out, _ = run(capsys, "--db", db, "ls")
    header, row = out.splitlines()
    assert header.split("\t") == ["id", "created", "entries", "last entry", "compacted"]
    assert row.split("\t")[2:3] == ["10"]
    assert row.endswith("\tyes")


def test_show_entries_context_and_stored_lines(capsys: pytest.CaptureFixture[str], db: str) -> None:
    run(capsys, "--db", db, "demo")
    (session_id,) = session_ids(capsys, db)
    status, out, _ = run(capsys, "show", session_id, "--db", db)
    assert status == 0
    assert "compaction" in out
    assert "get_weather" not in out  # a preview of text, not of tool calls
    status, out, _ = run(capsys, "--db", db, "show", session_id, "--context")
    assert out.splitlines()[0].startswith("user: [Conversation summary]")
    status, out, _ = run(capsys, "--db", db, "show", session_id, "--json")
    lines = out.splitlines()
    assert decode_meta(lines[0]).id == session_id
    assert [decode_entry(line).type for line in lines[1:]].count("compaction") == 1
    assert json.loads(lines[3])["message"]["tool_calls"][0]["id"] == "call_1"


def test_import_export_and_verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "import", str(FIXTURE))
    assert status == 0, err
    assert "imported 2 sessions (9 new entries) and 1 journals" in out
    status, out, _ = run(capsys, "--db", db, "export", str(tmp_path / "out"))
    assert status == 0
    assert (tmp_path / "out" / "sessions" / "hand-written.jsonl").read_bytes() == (
        FIXTURE / "sessions" / "hand-written.jsonl"
    ).read_bytes()
    status, out, _ = run(
        capsys, "--db", db, "export", str(tmp_path / "one"), "--session", "hand-written"
    )
    assert status == 0
    assert [p.name for p in (tmp_path / "one" / "sessions").iterdir()] == ["hand-written.jsonl"]
    status, out, _ = run(capsys, "--db", db, "verify")
    assert (status, out.strip()) == (0, "ok: 2 sessions, 9 entries checked")


def test_journal_shows_sessions_writes_and_skipped_lines(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    run(capsys, "--db", db, "import", str(FIXTURE))
    status, out, _ = run(capsys, "--db", db, "journal", "agent-1")
    assert status == 0
    assert "2 writes, 1 interrupted sessions, skipped lines: 3, 5, 7" in out
    assert "claude-test" in out


def test_verify_finds_faults_and_exits_non_zero(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    run(capsys, "--db", db, "demo")
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("DROP TRIGGER entries_no_update")
    connection.execute("UPDATE entries SET line = 'garbage' WHERE seq = 2")
    connection.execute("DROP TRIGGER entries_no_delete")
    connection.execute("DELETE FROM entries WHERE seq = 5")
    status, out, err = run(capsys, "--db", db, "verify")
    assert status == 1
    assert "fault(s)" in out
    assert "invalid JSON" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "no-such-session"], "session not found: 'no-such-session'"),
        (["--db", "redis://localhost", "ls"], "unknown store scheme 'redis'"),
        (["show", "../escape"], "invalid session id"),
        (["export", "/dev/null/x"], "archive"),
        (["migrate", "--db", "memory://"], "not a SQL database"),
    ],
)
def test_errors_are_one_line_on_stderr_with_a_non_zero_exit(
    capsys: pytest.CaptureFixture[str], db: str, args: list[str], message: str
) -> None:
    status, _, err = run(capsys, "--db", db, *args)
    assert status == 1
    assert err.count("\n") == 1
    assert err.startswith("sessionstore: error: ")
    assert message in err
    assert "Traceback" not in err


def test_a_corrupt_archive_is_refused_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    sessions = tmp_path / "archive" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "broken.jsonl").write_bytes(b'{"id":"broken"}\nnot json\n')
    status, _, err = run(capsys, "--db", db, "import", str(tmp_path / "archive"))
    assert status == 1
    assert "broken.jsonl line 2" in err
    assert err.count("\n") == 1


def test_a_newer_schema_is_refused(capsys: pytest.CaptureFixture[str], db: str) -> None:
    run(capsys, "--db", db, "migrate")
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'")
    status, _, err = run(capsys, "--db", db, "ls")
    assert status == 1
    assert "newer than this sessionstore" in err


def test_migrate_and_its_status(capsys: pytest.CaptureFixture[str], db: str) -> None:
    status, out, _ = run(capsys, "--db", db, "migrate", "--status")
    assert "revision (none)" in out
    status, out, _ = run(capsys, "migrate", "--db", f"sqlite:///{db}")
    assert status == 0
    assert migrate.head() in out
    status, out, _ = run(capsys, "--db", db, "migrate", "--status")
    assert "up to date" in out


def test_the_database_comes_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    monkeypatch.setenv("SESSIONSTORE_DB", db)
    assert main(["demo"]) == 0
    capsys.readouterr()
    assert len(session_ids(capsys, db)) == 1


def test_python_dash_m_and_the_script_run_in_a_real_process(tmp_path: Path) -> None:
    for command in (
        [sys.executable, "-m", "sessionstore"],
        [str(Path(sys.executable).parent / "sessionstore")],
    ):
        done = subprocess.run(
            [*command, "--db", str(tmp_path / "x.db"), "show", "missing"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 1
        assert done.stderr == "sessionstore: error: session not found: 'missing'\n"
