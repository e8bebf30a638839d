"""The command line's errors name the store as the user gave it (never the
driver URL the library builds, never a password) and say what to run."""

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.backends.sql.schema import VERSION_TABLE
from sessionstore.encryption.keys import generate_key
from sessionstore.testing.contract import message
from tests.cli.helpers import key_file, run

DRIVERS = ("sqlite+pysqlite", "sqlite:////", "postgresql+psycopg")


def no_driver_url(err: str) -> None:
    for driver in DRIVERS:
        assert driver not in err


@pytest.fixture
def sealed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A sealed store named relatively (``private.db``, the cwd its
    directory), and its key file."""
    monkeypatch.chdir(tmp_path)
    key = generate_key()

    async def fill() -> None:
        async with open_store("private.db", keys=key) as store:
            await store.create(SessionMeta(id="chat"))
            await store.append("chat", message("e1", "secret"))

    asyncio.run(fill())
    return "private.db", key_file(tmp_path / "store.key", key)


# ---------------------------------------------------------------- 9: a sealed store


@pytest.mark.parametrize("command", [["ls"], ["show", "chat"], ["keys", "status"], ["verify"]])
def test_a_sealed_store_without_keys_names_the_key_file_option_and_the_path_as_given(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str], command: list[str]
) -> None:
    status, out, err = run(capsys, "--db", "private.db", *command)
    assert (status, out) == (1, "")
    assert err == (
        "sessionstore: error: private.db is encrypted: open it with --key-file FILE "
        "(or $SESSIONSTORE_KEY_FILE), the keys that sealed it\n"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (None, "cannot be read (no such file or directory)"),
        ("# only a comment\n\n", "holds no key"),
        ("not a key\n", "is not a master key"),
        (generate_key() + "\nshort\n", "is not a master key"),
    ],
    ids=["missing", "empty", "not-a-key", "second-not-a-key"],
)
def test_a_bad_key_file_is_named_with_what_is_wrong_and_how_to_make_one(
    capsys: pytest.CaptureFixture[str],
    sealed: tuple[str, str],
    tmp_path: Path,
    text: str | None,
    why: str,
) -> None:
    bad = tmp_path / "bad.key"
    if text is not None:
        bad.write_text(text)
    status, out, err = run(capsys, "--db", "private.db", "--key-file", "bad.key", "ls")
    assert (status, out) == (1, "")
    assert err.startswith("sessionstore: error: --key-file bad.key: ")
    assert why in err
    assert "`sessionstore keys generate" in err
    assert len(err.splitlines()) == 1


def test_a_bad_key_file_from_the_environment_is_named_as_the_variable_and_the_file(
    capsys: pytest.CaptureFixture[str],
    sealed: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SESSIONSTORE_KEY_FILE", "gone.key")
    status, _, err = run(capsys, "--db", "private.db", "ls")
    assert status == 1
    assert err.startswith(
        "sessionstore: error: $SESSIONSTORE_KEY_FILE (gone.key): cannot be read (no such file"
    )


def test_keys_that_do_not_open_the_store_name_the_key_file(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str], tmp_path: Path
) -> None:
    other = key_file(tmp_path / "other.key", generate_key())
    status, _, err = run(capsys, "--db", "private.db", "--key-file", other, "ls")
    assert status == 1
    assert err.startswith(f"sessionstore: error: --key-file {other} does not fit private.db: ")
    assert "is wrapped by master key" in err
    no_driver_url(err)


def test_the_demo_on_a_sealed_store_says_to_give_the_key_file_next(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    keys = key_file(tmp_path / "demo.key", generate_key())
    status, out, _ = run(capsys, "--db", "demo.db", "--key-file", keys, "demo")
    assert status == 0
    last = out.splitlines()[-1]
    assert last.startswith("next: sessionstore show ")
    assert last.endswith(f" --db demo.db --key-file {keys}")
    command = last.removeprefix("next: sessionstore ").split()
    status, out, err = run(capsys, *command)  # the line works as it is
    assert (status, err) == (0, "")
    status, out, _ = run(capsys, "--db", "plain.db", "demo")
    assert out.splitlines()[-1].endswith(" --db plain.db")  # a plain store needs no key


# ------------------------------------------------------- 10: the target as the user gave it


def test_a_file_that_is_not_a_database_is_named_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "junk.db").write_text("hello, not a database\n")
    for argv in (["--db", "junk.db", "ls"], ["--db", "junk.db", "demo"]):
        status, out, err = run(capsys, *argv)
        assert (status, out) == (1, "")
        assert err.startswith(
            "sessionstore: error: junk.db is not a SQLite database (nor a JSONL directory): "
            "name a sessionstore store with --db TARGET, or make one to try: "
        )
    monkeypatch.setenv("SESSIONSTORE_DB", "junk.db")
    status, _, err = run(capsys, "ls")
    assert err.startswith("sessionstore: error: junk.db is not a SQLite database")
    assert (tmp_path / "junk.db").read_text() == "hello, not a database\n"


def test_no_such_database_says_where_the_target_came_from_and_how_to_make_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SESSIONSTORE_DB", raising=False)
    status, _, err = run(capsys, "ls")
    assert status == 1
    assert err == (
        "sessionstore: error: no such database: ./sessions.db (the default: no --db given, "
        "$SESSIONSTORE_DB unset); name a store with --db TARGET, or make one to try: "
        "sessionstore demo\n"
    )
    monkeypatch.setenv("SESSIONSTORE_DB", "elsewhere.db")
    status, _, err = run(capsys, "ls")
    assert err.startswith(
        "sessionstore: error: no such database: elsewhere.db (named by $SESSIONSTORE_DB); "
    )
    assert list(tmp_path.iterdir()) == []


def test_a_newer_schema_names_the_database_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "--db", "s.db", "migrate")[0] == 0
    with closing(sqlite3.connect("s.db")) as connection, connection:
        connection.execute(f"UPDATE {VERSION_TABLE} SET version_num = 'from-the-future'")
    status, _, err = run(capsys, "--db", "s.db", "ls")
    assert status == 1
    assert err.startswith("sessionstore: error: s.db: schema revision 'from-the-future' is newer")
    no_driver_url(err)


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://alice:s3cret@127.0.0.1:1/sessions",
        "postgresql+psycopg://alice:s3cret@127.0.0.1:1/sessions",
        "postgresql://alice@127.0.0.1:1/sessions?password=s3cret",
        "postgresql+asyncpg://alice:s3cret@127.0.0.1:1/sessions",  # refused by the library
    ],
    ids=["url", "driver", "query", "unsupported-driver"],
)
@pytest.mark.parametrize("command", [["ls"], ["migrate", "--status"], ["demo"]])
def test_a_postgresql_password_is_never_printed(
    capsys: pytest.CaptureFixture[str], target: str, command: list[str]
) -> None:
    status, out, err = run(capsys, "--db", target, *command)
    assert status == 1
    assert "s3cret" not in out + err
    assert "alice" in err  # the target is still named: its user and host
    assert "127.0.0.1:1/sessions" in err
    assert "postgresql+psycopg://alice" not in err or target.startswith("postgresql+psycopg")


def test_a_password_in_a_keyring_url_is_never_printed(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str]
) -> None:
    _, keys = sealed
    ring = "postgresql://bob:hunter22@127.0.0.1:1/keys"
    status, _, err = run(capsys, "--db", "private.db", "--key-file", keys, "--keyring", ring, "ls")
    assert status == 1
    assert "hunter22" not in err


def test_a_fault_verify_finds_names_the_database_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    async def fill() -> None:
        async with open_store("s.db") as store:
            await store.create(SessionMeta(id="chat"))
            await store.append_many("chat", [message(f"e{n}", "hello") for n in range(3)])

    asyncio.run(fill())
    with closing(sqlite3.connect("s.db")) as connection, connection:
        connection.execute("DROP TRIGGER entries_no_update")  # what damage does, unasked
        connection.execute("UPDATE entries SET line = 'garbage' WHERE seq = 2")
    status, _, err = run(capsys, "--db", "s.db", "verify")
    assert status == 1
    assert "fault: session 'chat', s.db entries line 3: invalid JSON" in err
    no_driver_url(err)
