"""The command line in a real process: on a terminal (rich forced to one, 80
columns), under Ctrl-C, and with its reader gone (``| head``)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sessionstore import CompactionEntry, Message, MessageEntry, SessionMeta, encode, open_store
from tests.cli.helpers import COMMAND, TRICKY, environment, on_terminal
from tests.dialects import FORECAST, require_frameworks, write_every_dialect
from tests.helpers import ROOT


def write_session(store: Path, meta: SessionMeta, entries: list[str], repeat: int = 1) -> None:
    """A JSONL session file, written as the store writes it (``repeat`` times the entries)."""
    store.mkdir(exist_ok=True)
    with (store / f"{meta.id}.jsonl").open("w") as file:
        file.write(encode(meta) + "\n")
        block = "".join(line + "\n" for line in entries)
        for _ in range(repeat):
            file.write(block)


def entry(text: str, entry_id: str = "e") -> str:
    return encode(MessageEntry(id=entry_id, timestamp="t", message=Message.user(text)))


def test_show_on_a_terminal_prints_stored_text_literally(tmp_path: Path) -> None:
    store = tmp_path / "store"
    lines = [entry(text, f"e{n}") for n, text in enumerate(TRICKY)]
    kept = CompactionEntry(id="c", timestamp="t", summary="[i]sum[/i]", first_kept_id="e1")
    write_session(store, SessionMeta(id="tricky"), [*lines, encode(kept)])
    done = on_terminal("--db", str(store), "show", "tricky")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    for text in TRICKY[:-1]:
        assert text in done.stdout
    assert "\\x1b[31mred" in done.stdout  # an escape sequence is shown, never run
    assert "[i]sum[/i] [keeps from e1]" in done.stdout  # the summary first
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    done = on_terminal("--db", str(store), "show", "tricky", "--context")
    assert "user: arr[i] = arr[j]" in done.stdout
    assert "user: [/bold]\n" not in done.stdout  # the context starts after the compaction
    assert "user: \\x1b[31mred" in done.stdout


@pytest.mark.parametrize("columns", [80, 120])
async def test_show_names_each_writer_s_tool_calls_and_results(
    tmp_path: Path, columns: int
) -> None:
    require_frameworks()
    # Written by each framework through its adapter (or as its API has it).
    store = tmp_path / "store"
    async with open_store(str(store)) as opened:
        sessions = await write_every_dialect(opened)
    call = r'get_weather\(\{"city": ?"Lisbon"\}\)'  # as each writer spells its JSON
    result = f"get_weather → {FORECAST}"
    for dialect, session_id in sessions.items():
        rows = on_terminal("--db", str(store), "show", session_id, columns=columns)
        assert rows.returncode == 0, rows.stderr
        assert max(len(line) for line in rows.stdout.splitlines()) <= columns, dialect
        assert "…" not in rows.stdout  # no role cut (`function…`), no text cut
        # A row's text is beside its role, or below it on a narrow terminal.
        assert re.search(rf"message +tool call +\S+ \S+\s+{call}\n", rows.stdout), dialect
        assert re.search(rf"message +tool result +\S+ \S+\s+{result}\n", rows.stdout), dialect
        context = on_terminal("--db", str(store), "show", session_id, "--context", columns=columns)
        lines = context.stdout.splitlines()
        assert lines[0] == "user: Weather in Lisbon?"
        assert re.fullmatch(f"tool call: {call}", lines[1]), dialect
        assert lines[2:] == [f"tool result: {result}", "assistant: Sunny."], dialect
        # The last two alone: the result names its call's id, the tool being out of sight.
        tail = on_terminal("--db", str(store), "show", session_id, "--tail", "2", columns=columns)
        assert re.search(rf"tool result +\S+ \S+\s+\S+ → {FORECAST}\n", tail.stdout), dialect


def test_a_compaction_row_shows_its_summary_first_at_80_and_120_columns(tmp_path: Path) -> None:
    store = tmp_path / "store"
    kept = str(uuid.uuid4())
    summary = "The user asked about Lisbon's weather tomorrow (sunny, 24 C)."
    marker = CompactionEntry(id="c", timestamp="t", summary=summary, first_kept_id=kept)
    write_session(store, SessionMeta(id="s"), [entry("hi", kept), encode(marker)])
    for columns in (80, 120):
        done = on_terminal("--db", str(store), "show", "s", columns=columns)
        assert summary in done.stdout, columns
        assert max(len(line) for line in done.stdout.splitlines()) <= columns
    wide = on_terminal("--db", str(store), "show", "s", columns=140)
    assert f"{summary} [keeps from {kept[:8]}…]" in wide.stdout


def test_ls_on_an_80_column_terminal_shows_every_id_whole(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = [str(uuid.uuid4()) for _ in range(3)] + ["tenant:42:" + "x" * 60, "y" * 120]
    for number, session_id in enumerate(ids):
        meta = SessionMeta(id=session_id, created_at=f"2026-11-30T17:26:19.56308161{number}+00:00")
        write_session(store, meta, [entry("hi")])
    done = on_terminal("--db", str(store), "ls")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    lines = done.stdout.splitlines()
    for session_id in ids:
        # On one line of ours (a terminal wraps a longer one, and copies it whole).
        assert any(line.split()[:1] == [session_id] for line in lines), session_id
    for line in lines:
        if not any(line.startswith(f" {session_id}") for session_id in ids[3:]):
            assert len(line) <= 80, line


def test_ls_on_a_terminal_marks_a_corrupt_session_and_lists_the_others(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_session(store, SessionMeta(id="sound"), [entry("hi")])
    write_session(store, SessionMeta(id="broken"), [entry("hi"), "not json"])
    done = on_terminal("--db", str(store), "ls")
    assert done.returncode == 1
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith(" ")}
    assert rows["broken"].split()[-1] == "corrupt"
    assert "corrupt" not in rows["sound"]
    assert "warning: session 'broken'" in done.stderr
    assert "Traceback" not in done.stderr


def test_show_limit_stops_reading_and_tail_decodes_only_what_it_shows(tmp_path: Path) -> None:
    # A damaged line after the first entry and before the last two: --limit 1
    # never reaches it, --tail 2 never decodes it; a whole show meets it.
    store = tmp_path / "store"
    lines = [entry("one", "e1"), "not json", entry("three", "e3"), entry("four", "e4")]
    write_session(store, SessionMeta(id="s"), lines)
    shown = subprocess.run(
        [*COMMAND, "--db", str(store), "show", "s", "--limit", "1"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
        check=False,
    )
    assert (shown.returncode, shown.stderr) == (0, "")
    assert [line.split("\t")[-1] for line in shown.stdout.splitlines()] == ["id", "e1"]
    for extra, status, ids in ((["--tail", "2"], 0, ["e3", "e4"]), ([], 1, ["e1"])):
        shown = subprocess.run(
            [*COMMAND, "--db", str(store), "show", "s", *extra],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=60,
            check=False,
        )
        assert shown.returncode == status
        rows = shown.stdout.splitlines()[1:]
        assert [row.split("\t")[-1] for row in rows] == ids
        assert [row.split("\t")[0] for row in rows] == (["3", "4"] if extra else ["1"])
    assert "s.jsonl line 3: invalid JSON" in shown.stderr
    assert len(shown.stderr.splitlines()) == 1


@pytest.fixture
def long_session(tmp_path: Path) -> tuple[Path, str]:
    """A JSONL store holding one session of 300,000 entries."""
    store = tmp_path / "store"
    meta = SessionMeta.new()
    write_session(store, meta, [entry("a message of a long session")], repeat=300_000)
    return store, meta.id


def test_show_streams_and_ctrl_c_stops_it_at_once(long_session: tuple[Path, str]) -> None:
    """The first rows come before the session is read whole, and Ctrl-C stops
    the stream where it is: the rest is never printed."""
    store, session_id = long_session
    process = subprocess.Popen(
        [*COMMAND, "--db", str(store), "show", session_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(),
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"#\ttype\ttimestamp\trole\ttext\tid\n"
    assert process.stdout.readline().startswith(b"1\tmessage\t")
    assert process.poll() is None  # streaming: the rest is still to come
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=600)  # a guard against a hang, not a limit
    assert process.returncode == 130
    assert err == b"sessionstore: interrupted\n"
    assert rest.count(b"\n") < 300_000 - 1  # stopped: not every row was printed


def test_show_into_a_pipe_that_closes_ends_quietly(long_session: tuple[Path, str]) -> None:
    store, session_id = long_session
    command = " ".join([*COMMAND, "--db", str(store), "show", session_id, "--json"])
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -n 2"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
        check=False,
    )
    assert done.stderr == ""
    assert len(done.stdout.splitlines()) == 2
    assert done.returncode == 141  # as a shell reports any writer whose reader left


def test_alembic_reads_the_store_from_sessionstore_db(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    for variable in ("SESSIONSTORE_DB", "SESSIONSTORE_URL"):
        env = environment(**{variable: f"sqlite:///{db}"})
        env.pop("SESSIONSTORE_URL" if variable == "SESSIONSTORE_DB" else "SESSIONSTORE_DB", None)
        done = subprocess.run(
            [sys.executable, "-m", "alembic", "upgrade", "head"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        deprecated = "SESSIONSTORE_URL is deprecated: set SESSIONSTORE_DB" in done.stderr
        assert deprecated == (variable == "SESSIONSTORE_URL")
    done = subprocess.run(
        [*COMMAND, "--db", str(db), "migrate", "--status"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
        check=False,
    )
    assert "up to date" in done.stdout


@pytest.mark.parametrize("columns", [80, 120])
async def test_journal_effects_on_a_terminal_show_each_key_whole_and_every_field(
    tmp_path: Path, columns: int
) -> None:
    db = str(tmp_path / "s.db")
    key = f"chat-1:{uuid.uuid4()}:append_line:1d2b11c60fa0363c:0"  # as a turn names a call
    async with open_store(db) as store:
        effects = store.journal("mailer").effects

        async def send() -> str:
            return "sent"

        await effects.once(send, tool="append_line", args={"to": "ada"}, key=key, session="chat-1")

        class Killed(BaseException):
            """The process dying mid-effect: the effect stays in doubt."""

        async def dies() -> str:
            raise Killed

        with pytest.raises(Killed):
            await effects.once(dies, tool="send_email", args={}, key=f"{key}-2", session="chat-1")
    for args, shown, state in (
        (("journal", "mailer"), key, "state done"),
        (("journal", "mailer", "--in-doubt"), f"{key}-2", "journal mailer"),
    ):
        done = on_terminal("--db", db, *args, columns=columns)
        lines = done.stdout.splitlines()
        assert shown in lines  # on a line of its own, not cut nor folded by the command
        details = lines[lines.index(shown) + 1]
        for field in (state, "session chat-1"):
            assert field in details
        assert max(len(line) for line in lines if shown not in line) <= columns
