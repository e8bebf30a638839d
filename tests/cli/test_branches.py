"""The command line's branches: ``fork``, ``head``, ``ls --tree`` and the parent column."""

import asyncio
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.testing.contract import message
from tests.cli.helpers import run


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A store holding session ``root`` with entries e0..e4."""
    target = str(tmp_path / "sessions.db")

    async def fill() -> None:
        async with await open_store(target) as store:
            await store.create(SessionMeta(id="root", created_at="2026-01-01T00:00:00Z"))
            await store.append_many("root", [message(f"e{n}", f"text {n}") for n in range(5)])

    asyncio.run(fill())
    return target


def lines_of(db: str, session_id: str) -> list[str]:
    async def read() -> list[str]:
        async with await open_store(db) as store:
            return [line async for line in store.raw_lines(session_id)]

    return asyncio.run(read())


def test_fork_prints_the_new_id_and_keeps_up_to_the_entry(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    status, out, err = run(capsys, "--db", db, "fork", "root", "--at", "e2")
    assert (status, err) == (0, "")
    new_id = out.strip()
    assert lines_of(db, new_id)[1:] == lines_of(db, "root")[1:4]
    status, out, _ = run(capsys, "--db", db, "fork", new_id, "--id", "retry", "--head", "chat")
    assert (status, out) == (0, "retry\n")
    assert lines_of(db, "retry")[1:] == lines_of(db, new_id)[1:]
    assert '"created_at":"20' in lines_of(db, "retry")[0]  # stamped now, like any new session
    status, out, _ = run(capsys, "--db", db, "head", "chat")
    assert status == 0
    assert out.splitlines()[0] == "moved at\tsession"
    assert [line.split("\t")[1] for line in out.splitlines()[1:]] == ["retry"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["fork", "root", "--at", "nope"], "session 'root' has no entry 'nope'"),
        (["fork", "ghost"], "session not found: 'ghost'"),
        (["fork", "root", "--id", "root"], "session already exists: 'root'"),
        (["fork", "root", "--id", "../x"], "invalid session id '../x'"),
        (["head", "chat"], "no head named 'chat'"),
        (["head", "chat", "--set", "ghost"], "session not found: 'ghost'"),
    ],
)
def test_refusals_are_one_line_and_change_nothing(
    capsys: pytest.CaptureFixture[str], db: str, args: list[str], says: str
) -> None:
    status, out, err = run(capsys, "--db", db, *args)
    assert status == 1
    assert out == ""
    assert says in err
    assert len(err.splitlines()) == 1
    assert run(capsys, "--db", db, "ls")[1].count("\n") == 2  # the header and root


def test_fork_refuses_a_store_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run(capsys, "--db", str(tmp_path / "missing.db"), "fork", "root")
    assert status == 1
    assert "no such database" in err
    assert not (tmp_path / "missing.db").exists()


def test_ls_names_each_parent_and_draws_the_tree_with_heads(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    for args in (
        ["fork", "root", "--id", "b", "--at", "e1"],
        ["fork", "root", "--id", "a"],
        ["fork", "a", "--id", "a1", "--head", "chat"],
        ["fork", "a", "--id", "a2"],
        ["head", "other", "--set", "a2"],
        ["head", "chat", "--set", "a1"],
    ):
        assert run(capsys, "--db", db, *args)[0] == 0

    async def orphan() -> None:  # a parent that is not in the store
        async with await open_store(db) as store:
            await store.create(SessionMeta(id="z", parent_session="gone", created_at="2027"))

    asyncio.run(orphan())
    status, out, _ = run(capsys, "--db", db, "ls")
    assert status == 0
    parents = {line.split("\t")[0]: line.split("\t")[6] for line in out.splitlines()[1:]}
    assert parents == {"root": "-", "a": "root", "b": "root", "a1": "a", "a2": "a", "z": "gone"}
    status, out, _ = run(capsys, "--db", db, "ls", "--tree")
    assert status == 0
    # Siblings oldest first.
    assert out.splitlines() == [
        "root  5 entries",
        "├─ b  2 entries",
        "└─ a  5 entries",
        "   ├─ a1  5 entries  <- chat",
        "   └─ a2  5 entries  <- other",
        "z  0 entries  (fork of gone, not in this store)",
    ]
