"""The command line, end to end on temporary stores."""

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import decode_entry, decode_meta, migrate
from sessionstore.cli import build_parser, main
from tests.cli.helpers import run
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()
FIXTURE = ROOT / "tests" / "data" / "archive"
COMMANDS = [
    "migrate",
    "ls",
    "search",
    "title",
    "show",
    "html",
    "fork",
    "head",
    "import",
    "export",
    "retire",
    "expire",
    "verify",
    "journal",
    "effects",
    "erase",
    "erasures",
    "vacuum",
    "keys",
    "demo",
]


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
    assert "--db TARGET" in out  # every command tells where its store comes from
    assert "SESSIONSTORE_DB" in out


def test_demo_plays_a_conversation_and_round_trips_it(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "demo")
    assert status == 0, err
    assert "byte-identical" in out
    assert "[Conversation summary]" in out
    assert len(session_ids(capsys, db)) == 1
    status, out, _ = run(capsys, "--db", db, "ls")
    header, row = out.splitlines()
    assert header.split("\t") == [
        "id",
        "created",
        "entries",
        "last entry",
        "compacted",
        "fault",
        "parent",
        "last activity",
        "owner",
        "title",
    ]
    assert row.split("\t")[2:3] == ["9"]
    assert row.split("\t")[4:7] == ["yes", "-", "-"]  # compacted, no fault, no parent
    assert row.split("\t")[8:] == ["-", ""]  # no owner, no title


def test_the_demo_sends_its_system_prompt_before_the_compacted_context(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "demo")
    assert status == 0, err
    sent = [line.strip() for line in out.splitlines() if line.startswith("    ")]
    assert sent[0] == "system: You are a concise travel assistant."
    assert sent[1].startswith("user: [Conversation summary] The user asked")


def test_the_demo_says_what_its_journal_holds_and_how_to_see_it(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "demo")
    assert status == 0, err
    said = " ".join(out.split())
    assert (
        "journal of agent 'demo-agent', what survives a crash: 2 runs stopped before saving "
        "their state, and the 2 writes they made (1 post and 1 comment) are on record for "
        "the agent's next start to report; see them: sessionstore journal demo-agent --db "
    ) in said
    assert max(len(line) for line in out.splitlines() if db not in line) <= 80
    command = next(line for line in out.splitlines() if "sessionstore journal" in line)
    status, out, _ = run(capsys, *command.split()[1:])
    assert status == 0
    assert "2 writes, 2 interrupted sessions" in out


def test_show_entries_context_and_stored_lines(capsys: pytest.CaptureFixture[str], db: str) -> None:
    run(capsys, "--db", db, "demo")
    (session_id,) = session_ids(capsys, db)
    status, out, _ = run(capsys, "show", session_id, "--db", db)
    assert status == 0
    assert "compaction" in out
    assert 'get_weather({"city": "Lisbon"})' in out  # a tool call shows what it asked
    status, out, _ = run(capsys, "--db", db, "show", session_id, "--context")
    assert out.splitlines()[0].startswith("user: [Conversation summary]")
    status, out, _ = run(capsys, "--db", db, "show", session_id, "--json")
    lines = out.splitlines()
    assert decode_meta(lines[0]).id == session_id
    assert [decode_entry(line).type for line in lines[1:]].count("compaction") == 1
    assert json.loads(lines[2])["message"]["tool_calls"][0]["id"] == "call_1"


def test_import_export_and_verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "import", str(FIXTURE))
    assert status == 0, err
    assert "imported 2 sessions (9 new entries), 1 journal and 0 heads from" in out
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


def test_heads_go_through_import_and_into_an_archive_holding_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    archive = tmp_path / "archive"
    (archive / "sessions").mkdir(parents=True)
    (archive / "sessions" / "s1.jsonl").write_bytes(b'{"id":"s1","version":1,"created_at":""}\n')
    (archive / "heads").mkdir()
    (archive / "heads" / "chat.jsonl").write_bytes(b'{"session_id":"s1","at":"t"}\n')
    status, out, err = run(capsys, "--db", db, "import", str(archive))
    assert status == 0, err
    assert "imported 1 session (0 new entries), 0 journals and 1 head from" in out
    status, out, err = run(capsys, "--db", db, "export", str(archive))  # heads/ is no stranger
    assert status == 0, err
    assert out.startswith("nothing new to export: 1 session, 0 journals, 1 head already in ")


def test_journal_shows_sessions_writes_and_skipped_lines(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    run(capsys, "--db", db, "import", str(FIXTURE))
    status, out, _ = run(capsys, "--db", db, "journal", "agent-1")
    assert status == 0
    assert "2 writes, 1 interrupted session, skipped lines: 3, 5, 7" in out
    assert "claude-test" in out


def test_journal_counts_keyed_lines_apart_from_skipped_ones(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    from sessionstore.sync import open_store

    with open_store(db) as store:  # a LangGraph thread's records, and a torn line
        store.journal("langgraph-chat").append_raw(
            b'{"key":"c//1","parent":null}', b'{"key":"c//2","parent":"1"}', b'{"torn'
        )
    status, out, _ = run(capsys, "--db", db, "journal", "langgraph-chat")
    assert status == 0
    assert "0 writes, 0 interrupted sessions, skipped lines: 3, 2 keyed lines" in out


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
    assert out.startswith("3 faults: 1 session, ")  # the line, the gap, the broken digest
    assert "invalid JSON" in err
    assert "entry 2 ('" in err
    assert "does not match its digest" in err


def test_verify_keeps_anchors_and_names_a_session_cut_short(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    run(capsys, "--db", db, "demo")
    sessions = len(session_ids(capsys, db))
    anchors = tmp_path / "sessions.anchors"
    status, out, _ = run(capsys, "--db", db, "verify", "--anchors", str(anchors))
    assert status == 0
    assert out.splitlines()[-1] == f"anchored {sessions} session{'s' * (sessions > 1)} in {anchors}"
    status, out, _ = run(capsys, "--db", db, "verify", "--anchors", str(anchors))
    assert status == 0
    assert f" {sessions} anchor" in out.splitlines()[0]
    kept = anchors.read_bytes()
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("DROP TRIGGER entries_no_delete")
    connection.execute("DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)")
    connection.close()
    assert run(capsys, "--db", db, "verify")[0] == 0  # unseen without the anchors
    status, out, err = run(capsys, "--db", db, "verify", "--anchors", str(anchors))
    assert status == 1
    assert out.startswith("1 fault: ")
    assert "with no erasure recorded since: entries were deleted" in err
    assert f"{anchors} left as it was" in err
    assert anchors.read_bytes() == kept
    anchors.write_text("not json\n")
    status, _, err = run(capsys, "--db", db, "verify", "--anchors", str(anchors))
    assert status == 1
    assert err.count("\n") == 1
    assert f"{anchors}, line 1: " in err


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
    run(capsys, "--db", db, "migrate")
    status, _, err = run(capsys, "--db", db, *args)
    assert status == 1
    assert err.count("\n") == 1
    assert err.startswith("sessionstore: error: ")
    assert message in err
    assert "Traceback" not in err


def test_import_names_what_it_skipped_in_the_archive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    sessions = tmp_path / "archive" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / ".hidden.jsonl").write_bytes(b'{"id":".hidden"}\n')
    (sessions / "s1.jsonl").write_bytes(b'{"id":"s1"}\n')
    status, out, err = run(capsys, "--db", db, "import", str(tmp_path / "archive"))
    assert status == 0
    assert out.startswith("imported 1 session ")
    (warning,) = err.splitlines()
    assert warning.startswith("warning: skipped ")
    assert ".hidden.jsonl" in warning


def test_a_file_name_holding_a_newline_is_refused_on_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    sessions = tmp_path / "archive" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "a\nb.jsonl").write_bytes(b'{"id":"a\\nb"}\n')
    status, _, err = run(capsys, "--db", db, "import", str(tmp_path / "archive"))
    assert status == 1
    refused, error = err.splitlines()  # one line each, the newline escaped
    assert refused.startswith("refused: ")
    assert "a\\x0ab.jsonl" in refused
    assert error.startswith("sessionstore: error: ")


def test_a_corrupt_archive_is_refused_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    sessions = tmp_path / "archive" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "broken.jsonl").write_bytes(b'{"id":"broken"}\nnot json\n')
    status, out, err = run(capsys, "--db", db, "import", str(tmp_path / "archive"))
    assert status == 1
    refused, error = err.splitlines()
    assert refused.startswith("refused: ")
    assert refused.endswith(
        "broken.jsonl line 2: session 'broken', entry 1: "
        "invalid JSON at line 1, column 1: Expecting value"
    )
    assert (
        error == f"sessionstore: error: import refused 1 file (listed above); {db} was not created"
    )
    assert not Path(db).exists()
    assert "imported 0 sessions (0 new entries), 0 journals and 0 heads" in out


def test_a_newer_schema_is_refused(capsys: pytest.CaptureFixture[str], db: str) -> None:
    run(capsys, "--db", db, "migrate")
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'")
    status, _, err = run(capsys, "--db", db, "ls")
    assert status == 1
    assert "newer than this sessionstore" in err


def test_migrate_and_its_status(capsys: pytest.CaptureFixture[str], db: str) -> None:
    sqlite3.connect(db).close()  # a database, empty
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
    assert main(["--db", str(tmp_path / "x.db"), "migrate"]) == 0
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
        assert done.stderr == (
            "sessionstore: error: session not found: 'missing'; the store holds no session\n"
        )


# ------------------------------------------------------------ a store that is not there

TRY = "name a store with --db TARGET, or make one to try: sessionstore demo --db {0}"

READ_COMMANDS = [
    ["ls"],
    ["show", "some-session"],
    ["verify"],
    ["export", "out"],
    ["journal", "agent-1"],
    ["migrate", "--status"],
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("typo.db", "no such database: {0} (no such file); " + TRY),
        ("sqlite:///{dir}/typo.db", "no such database: {0} (no such file); " + TRY),
        ("{dir}/typo", "no such store: {0} (no such directory); " + TRY),
    ],
    ids=["path", "url", "directory"],
)
def test_a_read_command_refuses_a_missing_store_and_creates_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    target: str,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    target = target.format(dir=tmp_path)
    status, out, err = run(capsys, *command, "--db", target)
    assert (status, out) == (1, "")
    assert err == f"sessionstore: error: {message.format(target)}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [*READ_COMMANDS[:-1], ["demo"]], ids=lambda c: " ".join(c))
def test_a_relative_jsonl_url_is_refused_naming_the_form_it_needs(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    """Not "no such store ... make one to try: sessionstore demo --db
    jsonl://./s", which demo refuses in turn."""
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, *command, "--db", "jsonl://./s")
    assert (status, out) == (1, "")
    assert "a jsonl:// target needs an absolute path (jsonl:///abs/dir)" in err
    assert "make one to try" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READ_COMMANDS[:-1], ids=lambda c: " ".join(c))
def test_a_read_command_refuses_a_database_without_a_store_and_leaves_it_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE notes (text)")
    status, _, err = run(capsys, *command, "--db", str(other))
    assert status == 1
    assert f"{other} is not a sessionstore database: it holds other tables (notes)" in err
    assert "migrate" not in err  # not ours: migrating would mix a store into it
    with closing(sqlite3.connect(other)) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        assert tables.fetchall() == [("notes",)]
    assert not (tmp_path / "out").exists()


def test_write_commands_still_create_their_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(capsys, "--db", str(tmp_path / "new"), "import", str(FIXTURE))[0] == 0
    assert len(list((tmp_path / "new").glob("*.jsonl"))) == 2
    assert run(capsys, "--db", str(tmp_path / "new.db"), "migrate")[0] == 0
    assert run(capsys, "--db", str(tmp_path / "new.db"), "ls")[0] == 0


@pytest.mark.parametrize("command", [["verify"], ["ls"], ["import", str(FIXTURE)]])
def test_an_archive_given_as_a_store_is_named_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str, command: list[str]
) -> None:
    run(capsys, "--db", db, "import", str(FIXTURE))
    run(capsys, "--db", db, "export", str(tmp_path / "archive"))
    status, out, err = run(capsys, "--db", str(tmp_path / "archive"), *command)
    assert (status, out) == (1, "")
    assert err == (
        f"sessionstore: error: {tmp_path / 'archive'} is an archive (sessions/ and journals/), "
        f"not a store; its sessions/ reads as one: --db {tmp_path / 'archive' / 'sessions'}\n"
    )
    status, out, _ = run(capsys, "--db", str(tmp_path / "archive" / "sessions"), "verify")
    assert (status, out) == (0, "ok: 2 sessions, 9 entries checked\n")


# ------------------------------------------------------------ a corrupt session


@pytest.fixture
def damaged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    """A JSONL store of the fixture's two sessions and a third whose line 3 is not JSON."""
    store = tmp_path / "store"
    run(capsys, "--db", str(store), "import", str(FIXTURE))
    bad = (FIXTURE / "sessions" / "hand-written.jsonl").read_text().splitlines()
    bad[0] = bad[0].replace("hand-written", "damaged")
    bad[2] = "not json"
    (store / "damaged.jsonl").write_text("\n".join(bad) + "\n")
    return str(store)


def test_ls_lists_every_session_and_marks_the_one_that_does_not_decode(
    capsys: pytest.CaptureFixture[str], damaged: str
) -> None:
    status, out, err = run(capsys, "--db", damaged, "ls")
    assert status == 1
    rows = {row.split("\t")[0]: row.split("\t") for row in out.splitlines()[1:]}
    assert rows.keys() == {"2b8f0c52-6f7e-4c3a-9d7b-5f0e1a2b3c4d", "hand-written", "damaged"}
    assert rows["damaged"][2] == "1"  # the entry read before the bad line
    assert rows["damaged"][5] == "corrupt"
    assert rows["hand-written"][5] == "-"
    warning, summary = err.splitlines()
    assert warning.startswith("warning: session 'damaged', ")
    assert warning.endswith(
        "damaged.jsonl line 3: invalid JSON at line 1, column 1: Expecting value"
    )
    assert summary.startswith("warning: 1 session marked corrupt")


def test_export_of_a_corrupt_session_says_so_and_exits_non_zero(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, damaged: str
) -> None:
    status, out, err = run(capsys, "--db", damaged, "export", str(tmp_path / "archive"))
    assert status == 1
    assert out.startswith("exported 3 sessions (")
    fault, error = err.splitlines()
    assert fault.startswith("fault: session 'damaged', ")
    assert "line 3: invalid JSON" in fault
    assert fault.endswith("(exported as stored: `import` will refuse that file)")
    assert error.startswith("sessionstore: error: 1 session exported with data that does not")
    # What import then says of it: the same line, refused.
    status, _, err = run(
        capsys, "--db", str(tmp_path / "copy"), "import", str(tmp_path / "archive")
    )
    assert status == 1
    assert "damaged.jsonl line 3: session 'damaged', entry 2: invalid JSON" in err
    # Exporting only sound sessions succeeds.
    only = ["--session", "hand-written"]
    status, out, _ = run(capsys, "--db", damaged, "export", str(tmp_path / "sound"), *only)
    assert status == 0


# ------------------------------------------------------------ show: literal text, tail, limit


def test_show_limit_and_tail_number_entries_by_their_place(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    run(capsys, "--db", db, "demo")
    (session_id,) = session_ids(capsys, db)
    _, out, _ = run(capsys, "--db", db, "show", session_id, "--limit", "2")
    assert [line.split("\t")[0] for line in out.splitlines()] == ["#", "1", "2"]
    _, out, _ = run(capsys, "--db", db, "show", session_id, "--tail", "3")
    assert [line.split("\t")[0] for line in out.splitlines()] == ["#", "7", "8", "9"]
    assert out.splitlines()[1].split("\t")[1] == "compaction"
    _, out, _ = run(capsys, "--db", db, "show", session_id, "--json", "--tail", "1")
    assert [decode_entry(line).type for line in out.splitlines()[1:]] == ["message"]
    assert decode_meta(out.splitlines()[0]).id == session_id
    _, out, _ = run(capsys, "--db", db, "show", session_id, "--context", "--limit", "1")
    assert out.startswith("user: [Conversation summary]")
    assert out.count(": ") == 1
    with pytest.raises(SystemExit) as exited:
        main(["--db", db, "show", session_id, "--tail", "1", "--limit", "1"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_piped_rows_stay_one_line_whatever_the_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    header = '{"id":"odd","version":1,"created_at":"2026\\t01"}'
    line = (
        '{"type":"message","id":"m","timestamp":"t","message":'
        '{"role":"user","content":"a\\tb\\nc \\u001b[31mred"}}'
    )
    store.mkdir()
    (store / "odd.jsonl").write_text(header + "\n" + line + "\n")
    _, out, _ = run(capsys, "--db", str(store), "show", "odd")
    assert out.splitlines()[1] == "1\tmessage\tt\tuser\ta b c \\x1b[31mred\tm"
    _, out, _ = run(capsys, "--db", str(store), "ls")
    assert out.splitlines()[1].split("\t")[:2] == ["odd", "2026 01"]


# ------------------------------------------------------------ wording


def test_counts_are_singular_or_plural(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    run(capsys, "--db", db, "import", str(FIXTURE))
    _, out, _ = run(
        capsys, "--db", db, "export", str(tmp_path / "one"), "--session", "hand-written"
    )
    assert out.startswith("exported 1 session (3 new entries, ")
    assert ", 0 journals and 0 heads to " in out


def test_import_of_a_path_that_does_not_exist_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    status, _, err = run(capsys, "--db", db, "import", str(tmp_path / "nonexistent"))
    assert status == 1
    missing = tmp_path / "nonexistent"
    assert err == f"sessionstore: error: no such archive: {missing} (it does not exist)\n"
    assert list(tmp_path.iterdir()) == []


def test_export_refuses_a_directory_that_holds_something_else(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str
) -> None:
    run(capsys, "--db", db, "import", str(FIXTURE))
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "cat.jpg").write_bytes(b"meow")
    status, out, err = run(capsys, "--db", db, "export", str(photos))
    assert (status, out) == (1, "")
    assert err.startswith(f"sessionstore: error: cannot export to {photos}: not empty and not")
    assert "(it holds cat.jpg)" in err
    assert [p.name for p in photos.iterdir()] == ["cat.jpg"]
    # An archive, an empty directory and a new one are fine.
    (tmp_path / "empty").mkdir()
    for dest in ("empty", "new", "new"):
        assert run(capsys, "--db", db, "export", str(tmp_path / dest))[0] == 0
