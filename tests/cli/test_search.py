"""The command line's ``search``: one hit a line piped, the matched words in
bold on a terminal, pages, ``--json``, and grep's exit status; on a JSONL
directory and a SQLite database."""

import asyncio
import json
import shlex
import subprocess

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.wire import encode_value
from tests.cli.helpers import COMMAND, environment, on_terminal, run, said

HEADER = ["session", "seq", "role", "snippet", "entry"]


def on_terminal_raw(*args: str) -> subprocess.CompletedProcess[str]:
    """As `on_terminal`, its colours and styles kept."""
    return subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        env=environment(FORCE_COLOR="1", COLUMNS="80", LINES="40"),
        timeout=60,
        check=False,
    )


def conversation(target: str, **sessions: list[str]) -> None:
    """Sessions holding the given messages, in order (each with owner ``alice``)."""

    async def go() -> None:
        async with await open_store(target) as store:
            for session_id, texts in sessions.items():
                await store.create(SessionMeta(id=session_id, owner="alice"))
                await store.append_many(session_id, said(session_id, *texts))

    asyncio.run(go())


def hits(out: str) -> list[list[str]]:
    header, *lines = out.splitlines()
    assert header.split("\t") == HEADER
    return [line.split("\t") for line in lines]


def test_search_prints_a_line_a_hit_and_finds_a_shared_message_in_each_fork(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    conversation(target, a=["the flaky test fails", "a Flaky\tTEST"], b=["nothing flaky here"])

    async def fork() -> None:
        async with await open_store(target) as store:
            await store.fork("a", at="a-0", meta=SessionMeta(id="f"))

    asyncio.run(fork())
    status, out, err = run(capsys, "--db", target, "search", "flaky", "test")
    assert (status, err) == (0, "")
    found = hits(out)
    assert sorted(found) == [
        ["a", "1", "user", "the flaky test fails", "a-0"],
        ["a", "2", "user", "a Flaky TEST", "a-1"],  # a tab in the text is a space
        ["f", "1", "user", "the flaky test fails", "a-0"],
    ]


def test_search_that_finds_nothing_exits_1_saying_so_on_stderr(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    conversation(target, a=["the flaky test"])
    assert run(capsys, "--db", target, "search", "zebra") == (1, "", "no message says 'zebra'\n")
    assert run(capsys, "--db", target, "search", "flaky", "zebra", "--owner", "alice") == (
        1,
        "",
        "no message says every word of 'flaky zebra' in the sessions of 'alice'\n",
    )
    assert run(capsys, "--db", target, "search", "flaky", "--owner", "bob")[0] == 1
    status, out, err = run(capsys, "--db", target, "search", "!!", "?")
    assert (status, out) == (1, "")
    assert err == (
        "sessionstore: error: '!! ?' holds no word to search for (words are letters and digits)\n"
    )


def test_search_pages_by_the_command_it_says_runs_next(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    conversation(target, **{f"s{n}": [f"needle number {n}"] for n in range(4)})
    command = ["--db", target, "search", "needle", "--limit", "2"]
    found: list[str] = []
    while True:
        status, out, err = run(capsys, *command)
        if status == 1:  # the page after a full last page: nothing more
            assert (out, err) == ("", "no more hits after that cursor\n")
            break
        assert status == 0
        found += [hit[0] for hit in hits(out)]
        (line,) = err.splitlines()
        assert line.startswith(f"next page: sessionstore --db {target} search needle --limit 2 ")
        command = shlex.split(line.removeprefix("next page: "))[1:]
    assert sorted(found) == ["s0", "s1", "s2", "s3"]


def test_search_json_is_one_canonical_object_a_hit_with_its_highlights(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    conversation(target, a=["first: a Needle in the haystack, then another needle"])
    status, out, err = run(capsys, "--db", target, "search", "NEEDLE", "--json")
    assert (status, err) == (0, "")
    (line,) = out.splitlines()
    hit = json.loads(line)
    assert encode_value(hit) == line
    assert list(hit) == [
        "session_id",
        "entry_id",
        "seq",
        "role",
        "snippet",
        "highlights",
        "cursor",
    ]
    assert (hit["session_id"], hit["entry_id"], hit["seq"], hit["role"]) == ("a", "a-0", 1, "user")
    words = [hit["snippet"][start:end] for start, end in hit["highlights"]]
    assert words == ["Needle", "needle"]


def test_search_on_a_terminal_bolds_the_words_and_prints_the_text_literally(target: str) -> None:
    text = "[bold]flaky[/bold] arr[i] :smile: \x1b[31mred [/bold] test"
    conversation(target, a=[text], b=["flaky test two"])
    done = on_terminal("--db", target, "search", "flaky", "test")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    hit = lines.index(" a  #1  user  a-0")
    assert lines[hit + 1] == "    [bold]flaky[/bold] arr[i] :smile: \\x1b[31mred [/bold] test"
    assert lines[-1] == "2 hits"
    raw = on_terminal_raw("--db", target, "search", "flaky").stdout
    assert "\x1b[1mflaky\x1b[0m" in raw  # the word itself, in bold
    assert "\x1b[31m" not in raw  # the stored escape sequence is shown, never run


def test_search_on_a_terminal_folds_a_long_snippet_under_its_hit(target: str) -> None:
    conversation(target, a=["word " * 30 + "needle " + "word " * 30])
    lines = on_terminal("--db", target, "search", "needle").stdout.splitlines()
    assert lines[0] == " a  #1  user  a-0"
    snippet = lines[1:-1]
    assert len(snippet) > 1
    assert all(line.startswith("    ") and len(line) <= 80 for line in snippet)
    assert "needle" in " ".join(snippet)
