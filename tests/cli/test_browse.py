"""The command line's browsing: ``ls`` (newest first, owners, titles, pages,
``--json``), ``title``, and the title in ``show`` and ``html``; on a JSONL
directory and a SQLite database."""

import asyncio
import json
import re
import shlex

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.wire import encode_value
from tests.cli.helpers import TRICKY, on_terminal, run, said
from tests.page import parse

COLUMNS = [
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
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def meta(
    session_id: str, *, created_at: str = "", owner: str | None = None, title: str | None = None
) -> SessionMeta:
    return SessionMeta(id=session_id, created_at=created_at, owner=owner, title=title)


def fill(target: str, *sessions: SessionMeta, entries: int = 1) -> None:
    """Create the sessions, in order, each with ``entries`` messages."""

    async def go() -> None:
        async with await open_store(target) as store:
            for session in sessions:
                await store.create(session)
                texts = [f"message {n} of {session.id}" for n in range(entries)]
                await store.append_many(session.id, said(session.id, *texts))

    asyncio.run(go())


def append(target: str, session_id: str, text: str) -> None:
    async def go() -> None:
        async with await open_store(target) as store:
            await store.append(session_id, said(session_id, text, first=100)[0])

    asyncio.run(go())


def set_title(target: str, session_id: str, title: str | None) -> None:
    async def go() -> None:
        async with await open_store(target) as store:
            await store.set_title(session_id, title)

    asyncio.run(go())


def rows(out: str) -> list[dict[str, str]]:
    """Piped ``ls``: its header, then each row as a dict."""
    header, *lines = out.splitlines()
    assert header.split("\t") == COLUMNS
    return [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines]


# ------------------------------------------------------------ ls, piped


def test_ls_lists_the_session_last_written_first_with_owner_and_title(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(
        target, meta("a", owner="alice", title="From the header"), meta("b"), meta("c", owner="bob")
    )
    append(target, "a", "a is written to last")
    set_title(target, "b", "Chosen [bold]later[/bold]")  # a title is no activity
    status, out, err = run(capsys, "--db", target, "ls")
    assert (status, err) == (0, "")
    listed = rows(out)
    assert [row["id"] for row in listed] == ["a", "c", "b"]
    by_id = {row["id"]: row for row in listed}
    assert (by_id["a"]["owner"], by_id["a"]["title"]) == ("alice", "From the header")
    assert (by_id["b"]["owner"], by_id["b"]["title"]) == ("-", "Chosen [bold]later[/bold]")
    assert (by_id["c"]["owner"], by_id["c"]["title"]) == ("bob", "")
    assert by_id["a"]["entries"] == "2"
    assert all(RFC3339.fullmatch(row["last activity"]) for row in listed)


def test_ls_orders_by_creation_and_keeps_one_owner(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(
        target,
        meta("a", created_at="2026-01-01T00:00:00Z", owner="alice"),
        meta("b", created_at="2026-01-03T00:00:00Z"),
        meta("c", created_at="2026-01-02T00:00:00Z", owner="alice"),
    )
    _, out, _ = run(capsys, "--db", target, "ls", "--order", "created")
    assert [row["id"] for row in rows(out)] == ["b", "c", "a"]
    _, out, _ = run(capsys, "--db", target, "ls", "--owner", "alice", "--order", "created")
    assert [row["id"] for row in rows(out)] == ["c", "a"]
    status, out, _ = run(capsys, "--db", target, "ls", "--owner", "nobody")
    assert (status, rows(out)) == (0, [])


def test_ls_pages_by_the_command_it_says_runs_next(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, *(meta(f"s{n}", owner="alice") for n in range(5)))
    seen: list[str] = []
    command = ["--db", target, "ls", "--owner", "alice", "--limit", "2"]
    pages = []
    while True:
        status, out, err = run(capsys, *command)
        assert status == 0
        pages.append(len(rows(out)))
        seen += [row["id"] for row in rows(out)]
        if not err:
            break
        assert err.startswith("next page: sessionstore --db ")
        (line,) = err.splitlines()
        command = shlex.split(line.removeprefix("next page: "))[1:]
        assert command[-2] == "--after"
        assert command[:-2] == ["--db", target, "ls", "--owner", "alice", "--limit", "2"]
    assert pages == [2, 2, 1]
    assert seen == ["s4", "s3", "s2", "s1", "s0"]  # each once, the last written first


def test_ls_json_is_one_canonical_object_a_line_whose_cursor_pages_on(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(
        target,
        meta("root", created_at="2026-01-01T00:00:00Z", owner="alice", title="T"),
        meta("other", created_at="2026-01-02T00:00:00Z"),
    )
    status, out, err = run(capsys, "--db", target, "ls", "--json", "--order", "created")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    objects = [json.loads(line) for line in lines]
    assert [encode_value(found) for found in objects] == lines  # wire's spelling
    assert list(objects[1]) == [
        "id",
        "title",
        "owner",
        "parent",
        "created",
        "last_activity",
        "entries",
        "compacted",
        "fault",
        "cursor",
    ]
    root = objects[1]
    assert RFC3339.fullmatch(root.pop("last_activity"))
    assert isinstance(root.pop("cursor"), str)
    assert root == {
        "id": "root",
        "title": "T",
        "owner": "alice",
        "parent": None,
        "created": "2026-01-01T00:00:00Z",
        "entries": 1,
        "compacted": False,
        "fault": None,
    }
    after = objects[0]["cursor"]
    _, out, _ = run(capsys, "--db", target, "ls", "--json", "--order", "created", "--after", after)
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["root"]


def test_ls_refuses_a_cursor_it_did_not_give_on_one_line(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, meta("a"), meta("b"))
    _, out, _ = run(capsys, "--db", target, "ls", "--json", "--order", "created", "--limit", "1")
    created_cursor = json.loads(out)["cursor"]
    for cursor in ("nonsense", created_cursor):  # the latter: of another order
        status, out, err = run(capsys, "--db", target, "ls", "--after", cursor)
        assert (status, out) == (1, "")
        assert err.startswith("sessionstore: error: ")
        assert "cursor" in err
        assert len(err.splitlines()) == 1


def test_ls_tree_refuses_the_paging_options_and_a_limit_must_be_one_or_more(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, meta("a"))
    status, out, err = run(capsys, "--db", target, "ls", "--tree", "--limit", "5", "--owner", "x")
    assert (status, out) == (1, "")
    assert err == (
        "sessionstore: error: --tree draws every session of the store: "
        "it takes no --limit, --owner\n"
    )
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", target, "ls", "--limit", "0")
    assert exited.value.code == 2
    assert "must be a whole number of 1 or more" in capsys.readouterr().err


# ------------------------------------------------------------ ls, on a terminal


def test_ls_on_a_terminal_shows_a_page_and_the_command_for_the_next(target: str) -> None:
    fill(target, *(meta(f"s{n:02}") for n in range(53)))
    done = on_terminal("--db", target, "ls")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "sessions, newest activity first"
    assert lines[1].split() == ["id", "last", "activity", "entries", "owner", "title"]
    listed = [line.split()[0] for line in lines[2:-1]]
    assert listed == [f"s{n:02}" for n in range(52, 2, -1)]  # a page of 50
    footer = lines[-1]
    assert footer.startswith(
        f"50 sessions shown; next page: sessionstore --db {target} ls --after "
    )
    command = shlex.split(footer.split("; next page: ")[1])[1:]
    done = on_terminal(*command)
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[2:-1]] == ["s02", "s01", "s00"]
    assert lines[-1] == "3 sessions"


def test_ls_on_a_terminal_prints_titles_and_owners_literally(target: str) -> None:
    fill(target, *(meta(f"t{n}", owner=text) for n, text in enumerate(TRICKY)))
    for n, text in enumerate(TRICKY):
        set_title(target, f"t{n}", text)
    done = on_terminal("--db", target, "ls")
    assert (done.returncode, done.stderr) == (0, "")
    shown = {line.split()[0]: line for line in done.stdout.splitlines()[2:-1]}
    for n, text in enumerate([*TRICKY[:-1], "\\x1b[31mred"]):
        owner, title = re.split(r"  +", shown[f"t{n}"])[-2:]
        assert (owner, title) == (text, text)
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_ls_on_a_narrow_terminal_puts_the_title_under_a_whole_id(target: str) -> None:
    session_id = "3f2b9c1e-0000-4000-8000-000000000000"
    fill(target, meta(session_id, owner="alice", title="A title long enough to need a line"))
    done = on_terminal("--db", target, "ls")
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["id", "last", "activity", "entries", "owner"]
    assert lines[2] == "   title"
    assert lines[3].split()[0] == session_id
    assert lines[3].split()[-2:] == ["1", "alice"]
    assert lines[4] == "   A title long enough to need a line"
    assert lines[5] == "1 session"


# ------------------------------------------------------------ title


def test_title_sets_clears_and_tells_the_history(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, meta("s", created_at="2026-01-01T00:00:00Z", title="From the header"))
    assert run(capsys, "--db", target, "title", "s", "Chosen [b]x[/b]") == (
        0,
        "s: Chosen [b]x[/b]\n",
        "",
    )
    _, out, _ = run(capsys, "--db", target, "ls")
    assert rows(out)[0]["title"] == "Chosen [b]x[/b]"
    assert run(capsys, "--db", target, "title", "s", "--clear") == (0, "s: From the header\n", "")
    status, out, err = run(capsys, "--db", target, "title", "s")
    assert (status, err) == (0, "")
    header, *history = [line.split("\t") for line in out.splitlines()]
    assert header == ["at", "change", "title"]
    assert history[0] == ["2026-01-01T00:00:00Z", "header", "From the header"]
    assert [row[1:] for row in history[1:]] == [
        ["set", "Chosen [b]x[/b]"],
        ["cleared", "From the header"],
    ]
    assert all(RFC3339.fullmatch(row[0]) for row in history[1:])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["title", "s", "x", "--clear"], "give a TEXT or --clear, not both"),
        (["title", "s", "  "], "a title needs some text"),
        (["title", "ghost", "x"], "session not found: 'ghost'"),
        (["title", "ghost"], "session not found: 'ghost'"),
    ],
)
def test_title_refusals_are_one_line_and_change_nothing(
    capsys: pytest.CaptureFixture[str], target: str, args: list[str], says: str
) -> None:
    fill(target, meta("s"))
    status, out, err = run(capsys, "--db", target, *args)
    assert (status, out) == (1, "")
    assert says in err
    assert len(err.splitlines()) == 1
    assert len(run(capsys, "--db", target, "title", "s")[1].splitlines()) == 2  # header row only


def test_title_history_on_a_terminal(target: str) -> None:
    fill(target, meta("s", created_at="2026-01-01T00:00:00Z"))
    set_title(target, "s", "[/bold] first")
    done = on_terminal("--db", target, "title", "s")
    lines = done.stdout.splitlines()
    assert lines[0] == "titles of session s"
    assert lines[1].split() == ["2026-01-01", "00:00:00", "header", "(none)"]
    assert lines[2].split()[2:] == ["set", "[/bold]", "first"]
    assert lines[3] == "title now: [/bold] first"


# ------------------------------------------------------------ show and html


def test_show_on_a_terminal_names_the_title(target: str) -> None:
    fill(target, meta("s"), entries=3)
    set_title(target, "s", "[bold]Loud[/bold] \x1b[31mred")
    for extra in ([], ["--tail", "1"], ["--limit", "1"]):
        done = on_terminal("--db", target, "show", "s", *extra)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == "session s — [bold]Loud[/bold] \\x1b[31mred"
    fill(target, meta("plain"))
    assert on_terminal("--db", target, "show", "plain").stdout.splitlines()[0] == "session plain"


def test_the_html_page_is_headed_by_the_title_as_text(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, meta("s"), meta("plain"))
    title = "<script>alert(1)</script> & [b]"
    set_title(target, "s", title)
    status, out, _ = run(capsys, "--db", target, "html", "s")
    assert status == 0
    page = parse(out)
    assert page.find("h1").text() == title
    assert page.find(cls="session-id").text() == "s"
    assert page.find("title").text() == f"{title} · session s"
    assert not page.find_all("script")
    _, out, _ = run(capsys, "--db", target, "html", "plain")
    assert parse(out).find("h1").text() == "session plain"
