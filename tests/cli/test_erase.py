"""The command line's lifecycle: ``erase`` and ``erasures``."""

import asyncio
import io
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.testing.contract import message
from tests.cli.helpers import run


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A JSONL store holding session ``chat`` with entries e0..e2."""
    target = str(tmp_path / "sessions")

    async def fill() -> None:
        async with await open_store(target) as store:
            await store.create(SessionMeta(id="chat"))
            await store.append_many("chat", [message(f"e{n}", f"text {n}") for n in range(3)])

    asyncio.run(fill())
    return target


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_erase_with_yes_prints_what_went_and_erasures_lists_it(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "erase", "chat", "--reason", "user asked", "--yes")
    assert (status, err) == (0, "")
    assert out.startswith("erased chat: 3 entries, blake2b-256 ")
    digest = out.split()[-1]
    status, out, _ = run(capsys, "--db", db, "erasures")
    assert status == 0
    header, row = out.splitlines()
    assert header == "kind\tname\tat\treason\tlines\tdigest\tkey"
    kind, name, _, reason, lines, stored, key = row.split("\t")
    assert (kind, name, reason, lines, stored) == ("session", "chat", "user asked", "3", digest)
    assert key == ""  # a plain store destroys no key
    status, _, err = run(capsys, "--db", db, "show", "chat")
    assert status == 1
    assert "not found" in err


def test_piped_stdin_without_yes_is_refused_and_nothing_changes(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    status, out, err = run(capsys, "--db", db, "erase", "chat", "--reason", "r")
    assert (status, out) == (1, "")
    assert err.count("\n") == 1
    assert "pass --yes" in err
    assert run(capsys, "--db", db, "erasures")[1] == "kind\tname\tat\treason\tlines\tdigest\tkey\n"


def test_on_a_terminal_it_asks_naming_the_session_and_its_entries(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    status, out, err = run(capsys, "--db", db, "erase", "chat", "--reason", "r")
    assert (status, out) == (1, "")
    assert "erase session 'chat' (3 entries) for good? [y/N]" in err
    assert "left as it is" in err
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    status, out, _ = run(capsys, "--db", db, "erase", "chat", "--reason", "r")
    assert status == 0
    assert out.startswith("erased chat: 3 entries")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["erase", "ghost", "--reason", "r", "--yes"], "session not found: 'ghost'"),
        (["erase", "chat", "--reason", "  ", "--yes"], "--reason must say why"),
        (["erase", "../x", "--reason", "r", "--yes"], "invalid session id '../x'"),
    ],
)
def test_erase_refusals_are_one_line_and_change_nothing(
    capsys: pytest.CaptureFixture[str], db: str, args: list[str], says: str
) -> None:
    status, out, err = run(capsys, "--db", db, *args)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1
    assert says in err
    assert run(capsys, "--db", db, "erasures")[1].count("\n") == 1  # the header only


def test_a_missing_store_is_refused_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    for args in (["erase", "x", "--reason", "r", "--yes"], ["erasures"]):
        status, _, err = run(capsys, "--db", str(missing), *args)
        assert status == 1
        assert "no such store" in err
    assert not missing.exists()


class _AppendingTerminal(_Terminal):
    """A terminal where another writer appends while the question is open."""

    def __init__(self, target: str) -> None:
        super().__init__("y\n")
        self.target = target

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        from sessionstore.sync import open_store as open_sync

        with open_sync(self.target) as other:
            other.append("chat", message("late", "appended while asked"))
        return super().readline(-1 if size is None else size)


def test_an_append_while_asking_keeps_the_session(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    monkeypatch.setattr("sys.stdin", _AppendingTerminal(db))
    status, _, err = run(capsys, "--db", db, "erase", "chat", "--reason", "asked")
    assert status == 1
    assert "changed" in err  # only what was shown and confirmed may go
    assert run(capsys, "--db", db, "show", "chat", "--limit", "9")[1].count("\n") == 5


def test_fork_with_a_bad_head_name_makes_nothing(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, _, err = run(capsys, "--db", db, "fork", "chat", "--head", ".bad")
    assert status == 1
    assert "invalid session id '.bad'" in err
    assert run(capsys, "--db", db, "ls")[1].count("\n") == 2  # the header and chat


def test_check_with_json_is_refused(capsys: pytest.CaptureFixture[str], db: str) -> None:
    status, out, err = run(capsys, "--db", db, "show", "chat", "--json", "--check", "openai")
    assert (status, out) == (1, "")
    assert "give --context too" in err
