"""What the command line prints: every user-supplied string escaped by one
function, and counts of any size taken."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.cli.output import cell, escaped, literal, shown
from sessionstore.testing.contract import message
from tests.cli.helpers import on_terminal, run

HIDDEN = {
    "bidi override (Cf)": "\u202e",
    "zero-width space (Cf)": "\u200b",
    "isolate (Cf)": "\u2066",
    "tag (Cf)": "\U000e0041",
    "escape (Cc)": "\x1b",
    "C1 control (Cc)": "\x9b",
    "private use (Co)": "\ue000",
    "supplementary private use (Co)": "\U000f0000",
    "lone surrogate (Cs)": "\ud800",
    "line separator (Zl)": "\u2028",
    "paragraph separator (Zp)": "\u2029",
}
ESCAPES = {
    "\u202e": "\\u202e",
    "\u200b": "\\u200b",
    "\u2066": "\\u2066",
    "\U000e0041": "\\U000e0041",
    "\x1b": "\\x1b",
    "\x9b": "\\x9b",
    "\ue000": "\\ue000",
    "\U000f0000": "\\U000f0000",
    "\ud800": "\\ud800",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}

# A session whose id, title, owner, entries and head all hide something.
REVERSED = "\u202egnp.exe"  # shows as "exe.png" when printed raw
SPLIT = "a\u200bb"  # shows as "ab"


def _raw(text: str) -> list[str]:
    """The hidden characters ``text`` holds as they are."""
    return [char for char in HIDDEN.values() if char in text]


@pytest.mark.parametrize("char", list(HIDDEN.values()), ids=list(HIDDEN))
def test_every_hidden_character_is_written_as_an_escape(char: str) -> None:
    text = f"x{char}y"
    for made_safe in (shown, escaped, literal):
        assert made_safe(text) == f"x{ESCAPES[char]}y", made_safe.__name__
    # A cell is one line: whitespace (the separators) becomes one space.
    assert cell(text) == ("x y" if char.isspace() else f"x{ESCAPES[char]}y")


def test_visible_text_is_left_as_it_is() -> None:
    text = "plain é 漢字 😀 [bold] ok"
    assert shown(text) == escaped(text) == cell(text) == literal(text) == text
    spaced = "non\xa0breaking\u3000wide"  # spaces a terminal shows
    assert shown(spaced) == escaped(spaced) == literal(spaced) == spaced


def test_literal_keeps_lines_and_tabs_and_escapes_the_rest() -> None:
    assert literal("a\n\tb\u2028c\rd") == "a\n\tb\\u2028c\\x0dd"
    assert escaped("a\n\tb") == "a\\x0a\\x09b"
    assert cell("a \n\t b\u2029c") == "a b c"  # separators are whitespace: one space


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A JSONL store where every user-supplied string hides a character."""
    target = str(tmp_path / "sessions")

    async def fill() -> None:
        async with await open_store(target) as s:
            meta = SessionMeta(
                id=REVERSED,
                created_at="2026-01-01T00:00:00Z",
                title="title\u2066hidden",
                owner="owner\u200f",
            )
            await s.create(meta)
            await s.append_many(
                REVERSED,
                [
                    message(SPLIT, "hello \u202ereversed"),
                    message("e2", "hello again\u2029para"),
                ],
            )
            await s.set_head("head\u200dname", REVERSED)
            await s.set_title(REVERSED, "now\u202a titled")
            await s.fork(REVERSED, at=SPLIT, meta=SessionMeta(id=SPLIT))
            await s.erase(SPLIT, reason="asked\u200b twice")
            await s.journal("agent\u2068").clear()

    asyncio.run(fill())
    return target


PIPED = [
    ["ls"],
    ["ls", "--tree"],
    ["show", REVERSED],
    ["show", REVERSED, "--context"],
    ["show", REVERSED, "--tail", "1"],
    ["title", REVERSED],
    ["head"],
    ["head", "head\u200dname"],
    ["search", "hello"],
    ["erasures"],
    ["verify"],
    ["journal", "agent\u2068"],
    ["fork", REVERSED, "--id", "new\u200bfork", "--head", "other\u202ehead"],
    ["title", REVERSED, "again\u200b"],
    ["show", "missing\u202eid"],
    ["erase", REVERSED, "--reason", "why\u202e", "--yes"],
]


@pytest.mark.parametrize("command", PIPED, ids=[" ".join(c) for c in PIPED])
def test_no_command_prints_a_hidden_character(
    capsys: pytest.CaptureFixture[str], store: str, command: list[str]
) -> None:
    _, out, err = run(capsys, "--db", store, *command)
    assert "Traceback" not in err
    assert _raw(out) == [], out
    assert _raw(err) == [], err


def test_the_archive_commands_escape_the_paths_they_name(
    capsys: pytest.CaptureFixture[str], store: str, tmp_path: Path
) -> None:
    archive = str(tmp_path / "arch\u202eive")
    copy = str(tmp_path / "co\u200bpy")
    for command in (
        ["--db", store, "export", archive],
        ["--db", copy, "import", archive],
        ["--db", copy, "retire", "--to", archive, "--session", REVERSED],
    ):
        status, out, err = run(capsys, *command)
        assert status == 0, err
        assert "arch\\u202eive" in out
        assert _raw(out) == [], out
        assert _raw(err) == [], err


def test_ls_and_show_on_a_terminal_escape_what_would_hide_or_reorder(store: str) -> None:
    done = on_terminal("--db", store, "ls")
    assert done.returncode == 0, done.stderr
    assert "\\u202egnp.exe" in done.stdout
    assert _raw(done.stdout + done.stderr) == []
    done = on_terminal("--db", store, "show", REVERSED)
    assert done.returncode == 0, done.stderr
    assert "session \\u202egnp.exe — now\\u202a titled" in done.stdout
    assert "a\\u200bb" in done.stdout
    assert "hello \\u202ereversed" in done.stdout
    assert _raw(done.stdout + done.stderr) == []


def test_head_title_and_search_on_a_terminal_escape_too(store: str) -> None:
    for command in (["head", "head\u200dname"], ["title", REVERSED], ["search", "hello"]):
        done = on_terminal("--db", store, *command)
        assert done.returncode == 0, done.stderr
        assert _raw(done.stdout + done.stderr) == [], command


def test_an_error_naming_a_path_escapes_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "no\u202estore")
    status, _, err = run(capsys, "--db", missing, "ls")
    assert status == 1
    shown_as = missing.replace("\u202e", "\\u202e")
    assert err.startswith(f"sessionstore: error: no such store: {shown_as} (no such directory); ")
    assert "\u202e" not in err


# ---------------------------------------------------------------- counts

HUGE = "99999999999999999999"


@pytest.fixture
def filled(target: str) -> str:
    """The ``target`` store (JSONL or SQLite) holding two sessions of three messages."""

    async def fill() -> None:
        async with await open_store(target) as s:
            for name in ("one", "two"):
                await s.create(SessionMeta(id=name, created_at="2026-01-01T00:00:00Z"))
                await s.append_many(name, [message(f"{name}{n}", "hello") for n in range(3)])

    asyncio.run(fill())
    return target


@pytest.mark.parametrize(
    ("command", "rows"),
    [
        (["ls", "--limit", HUGE], 1 + 2),
        (["ls", "--limit", "9" * 5000], 1 + 2),  # more digits than int() reads
        (["search", "hello", "--limit", HUGE], 1 + 6),
        (["show", "one", "--limit", HUGE], 1 + 3),
        (["show", "one", "--tail", HUGE], 1 + 3),
        (["show", "one", "--json", "--tail", HUGE], 1 + 3),
        (["show", "one", "--context", "--tail", HUGE], 3),
        (["show", "one", "--context", "--limit", HUGE], 3),
    ],
)
def test_a_count_larger_than_anything_means_everything(
    capsys: pytest.CaptureFixture[str], filled: str, command: list[str], rows: int
) -> None:
    status, out, err = run(capsys, "--db", filled, *command)
    assert (status, err) == (0, "")
    assert len(out.splitlines()) == rows


@pytest.mark.parametrize(
    "option",
    [
        ["ls", "--limit"],
        ["search", "hello", "--limit"],
        ["show", "one", "--limit"],
        ["show", "one", "--tail"],
    ],
    ids=lambda o: " ".join(o),
)
@pytest.mark.parametrize("count", ["-1", "0", "two", "1.5"])
def test_every_count_option_takes_one_rule_with_one_message(
    capsys: pytest.CaptureFixture[str], filled: str, option: list[str], count: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", filled, *option, count)
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    command, name = option[0], option[-1]
    assert err == (
        f"sessionstore {command}: error: argument {name}: "
        f"must be a whole number of 1 or more, not {count!r}"
    )


@pytest.mark.parametrize("age", ["99999999999d", "9999999999999999999999h", "800000d"])
def test_an_idle_age_older_than_any_date_is_refused(
    capsys: pytest.CaptureFixture[str], filled: str, tmp_path: Path, age: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", filled, "retire", "--to", str(tmp_path / "archive"), "--idle", age)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --idle: reaches back before the year 1: '{age}'" in err
    assert "Traceback" not in err
