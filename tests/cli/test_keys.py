"""The command line on a sealed store: keys from a file or the environment,
never an argument, and the ``keys`` command (docs/encryption.md)."""

import asyncio
import base64
import os
import stat
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.encryption.keys import fingerprint
from sessionstore.testing.contract import message
from tests.cli.helpers import key_file, run


def generated(capsys: pytest.CaptureFixture[str]) -> str:
    status, out, err = run(capsys, "keys", "generate")
    assert (status, err) == (0, "")
    key = out.strip()
    assert len(base64.urlsafe_b64decode(key)) == 32
    return key


@pytest.fixture
def sealed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """A sealed SQLite store holding ``chat``, and its key."""
    key, db = generated(capsys), str(tmp_path / "s.db")

    async def fill() -> None:
        async with open_store(db, keys=key) as store:
            await store.create(SessionMeta(id="chat", title="Private plans"))
            await store.append_many("chat", [message(f"e{n}", f"secret {n}") for n in range(3)])

    asyncio.run(fill())
    return db, key


def test_a_sealed_store_reads_with_a_key_file_or_the_environment_and_not_without(
    capsys: pytest.CaptureFixture[str],
    sealed: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, key = sealed
    status, out, err = run(capsys, "--db", db, "ls")
    assert status != 0
    assert f"{db} is encrypted: open it with --key-file FILE (or $SESSIONSTORE_KEY_FILE)" in err
    keys = key_file(tmp_path / "store.key", key)
    status, out, err = run(capsys, "--db", db, "--key-file", keys, "show", "chat")
    assert (status, err) == (0, "")
    assert "secret 2" in out
    status, out, _ = run(capsys, "ls", "--db", db, "--key-file", keys)  # after the command too
    assert "Private plans" in out
    monkeypatch.setenv("SESSIONSTORE_KEYS", key)
    status, out, _ = run(capsys, "--db", db, "search", "secret")
    assert status == 0
    assert "chat" in out
    monkeypatch.delenv("SESSIONSTORE_KEYS")
    monkeypatch.setenv("SESSIONSTORE_KEY_FILE", keys)
    status, out, _ = run(capsys, "--db", db, "show", "chat", "--tail", "1")
    assert "secret 2" in out


def test_no_option_takes_a_key_itself(capsys: pytest.CaptureFixture[str]) -> None:
    for option in ("--key", "--keys"):
        with pytest.raises(SystemExit):
            run(capsys, option, "x", "ls")


def test_keys_generate_writes_a_private_file_and_never_overwrites_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "new.key"
    status, out, err = run(capsys, "keys", "generate", "--out", str(out_file))
    assert (status, err) == (0, "")
    key = out_file.read_text().strip()
    assert fingerprint(base64.urlsafe_b64decode(key)) in out
    assert key not in out  # a key written to a file is not also shown
    assert stat.S_IMODE(os.stat(out_file).st_mode) == 0o600
    status, _, err = run(capsys, "keys", "generate", "--out", str(out_file))
    assert status != 0
    assert "never overwritten" in err
    assert out_file.read_text().strip() == key


def test_keys_status_and_rotate(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str], tmp_path: Path
) -> None:
    db, old = sealed
    new = generated(capsys)
    old_print = fingerprint(base64.urlsafe_b64decode(old))
    new_print = fingerprint(base64.urlsafe_b64decode(new))
    only_old = key_file(tmp_path / "old.key", old)
    status, out, _ = run(capsys, "--db", db, "--key-file", only_old, "keys", "status")
    assert status == 0
    assert f"master key {old_print}: wraps 2 data keys" in out  # the session's, the index's
    both = key_file(tmp_path / "both.key", new, old)
    status, out, err = run(capsys, "--db", db, "--key-file", both, "keys", "rotate")
    assert (status, err) == (0, "")
    assert "2 data keys rewrapped" in out
    assert f"master key {new_print}: wraps 2 data keys" in out
    assert old_print not in out
    only_new = key_file(tmp_path / "new.key", new)
    status, out, _ = run(capsys, "--db", db, "--key-file", only_new, "show", "chat")
    assert "secret 0" in out
    status, _, err = run(capsys, "--db", db, "--key-file", only_old, "ls")
    assert status != 0
    assert "not by a key given" in err


def test_keys_status_of_a_plain_store_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "plain.db")
    asyncio.run(_plain(db))
    status, out, _ = run(capsys, "--db", db, "keys", "status")
    assert status == 0
    assert "not encrypted" in out
    status, _, err = run(capsys, "--db", db, "keys", "rotate")
    assert status != 0
    assert "needs the keys" in err


async def _plain(db: str) -> None:
    async with open_store(db) as store:
        await store.create(SessionMeta(id="chat"))


def test_an_encrypted_export_imports_back_with_the_key_file_alone(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str], tmp_path: Path
) -> None:
    db, key = sealed
    keys, backup = key_file(tmp_path / "store.key", key), str(tmp_path / "backup")
    status, out, err = run(capsys, "--db", db, "--key-file", keys, "export", backup, "--encrypted")
    assert (status, err) == (0, "")
    assert out.startswith("exported 1 session (3 new entries")
    assert sorted(os.listdir(backup)) == ["keys.jsonl", "manifest.txt", "sessions"]
    assert b"secret" not in (tmp_path / "backup" / "sessions" / "chat.sealed").read_bytes()
    restored = str(tmp_path / "restored.db")
    status, out, err = run(capsys, "--db", restored, "import", backup)
    assert status != 0
    assert "give the master key that sealed it (--key-file)" in err
    status, out, err = run(capsys, "--db", restored, "--key-file", keys, "import", backup)
    assert (status, err) == (0, "")
    status, out, _ = run(capsys, "--db", restored, "--key-file", keys, "show", "chat")
    assert "secret 2" in out
    status, _, err = run(capsys, "--db", restored, "export", str(tmp_path / "b2"), "--encrypted")
    assert status != 0
    assert (
        f"{restored} is encrypted: open it with --key-file FILE (or $SESSIONSTORE_KEY_FILE)" in err
    )


def test_a_device_or_fifo_as_key_file_is_one_line_and_exit_1(
    sealed: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = sealed
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        status, out, err = run(capsys, "--db", db, "--key-file", path, "ls")
        assert (status, out) == (1, "")
        assert err.count("\n") == 1
        assert f"key file '{path}' is not a regular file" in err


def test_keys_seal_heads_authenticates_the_heads_of_a_store_sealed_before_0010(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str], tmp_path: Path
) -> None:
    import sqlite3
    from contextlib import closing

    db, key = sealed
    keys = key_file(tmp_path / "store.key", key)

    async def move() -> str | None:
        async with open_store(db, keys=key) as store:
            await store.set_head("main", "chat")
            return await store.head("main")

    assert asyncio.run(move()) == "chat"
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("DROP TRIGGER head_seals_no_delete")
        connection.execute("DELETE FROM head_seals")  # as a store sealed before 0010 holds
    status, out, err = run(capsys, "--db", db, "keys", "seal-heads")
    assert status != 0
    assert "keys seal-heads needs the keys: --key-file" in err
    status, out, err = run(capsys, "--db", db, "--key-file", keys, "keys", "seal-heads")
    assert (status, err) == (0, "")
    assert out.startswith("1 head position sealed\n")
    status, out, err = run(capsys, "--db", db, "--key-file", keys, "keys", "seal-heads")
    assert out.startswith("0 head positions sealed\n")
