"""``export`` and ``import`` say what they did: a sealed store is not
written in plaintext unasked, an export that wrote nothing says so, and an
import that brought nothing leaves no new store behind."""

import asyncio
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.encryption.keys import generate_key
from sessionstore.testing.contract import message
from tests.cli.helpers import key_file, run


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[str, str]:
    """A sealed store holding ``chat`` ("secret plans"), and its key file."""
    db, key = str(tmp_path / "private.db"), generate_key()

    async def fill() -> None:
        async with open_store(db, keys=key) as store:
            await store.create(SessionMeta(id="chat"))
            await store.append("chat", message("e1", "secret plans"))

    asyncio.run(fill())
    return db, key_file(tmp_path / "store.key", key)


@pytest.mark.parametrize("html", [[], ["--html"]], ids=["plain", "html"])
def test_exporting_a_sealed_store_in_plaintext_needs_plaintext(
    capsys: pytest.CaptureFixture[str],
    sealed: tuple[str, str],
    tmp_path: Path,
    html: list[str],
) -> None:
    db, keys = sealed
    out_dir = tmp_path / "out"
    also = ["--encrypted"] if html else []  # sealed sessions, but readable pages
    status, out, err = run(
        capsys, "--db", db, "--key-file", keys, "export", str(out_dir), *html, *also
    )
    assert (status, out) == (1, "")
    what = "--html writes its pages" if html else "a plain export writes its sessions"
    assert err.startswith(
        f"sessionstore: error: {db} is encrypted, and {what} to {out_dir} in plaintext; "
    )
    assert "--plaintext" in err
    assert not out_dir.exists()
    argv = ["--db", db, "--key-file", keys, "export", str(out_dir), *html, *also, "--plaintext"]
    status, out, err = run(capsys, *argv)
    assert (status, err) == (0, "")
    written = b"".join(p.read_bytes() for p in out_dir.rglob("*") if p.is_file())
    assert b"secret plans" in written


def test_an_encrypted_export_of_a_sealed_store_needs_no_flag(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, str], tmp_path: Path
) -> None:
    db, keys = sealed
    out_dir = tmp_path / "out"
    status, _, err = run(
        capsys, "--db", db, "--key-file", keys, "export", str(out_dir), "--encrypted"
    )
    assert (status, err) == (0, "")
    assert b"secret plans" not in b"".join(p.read_bytes() for p in out_dir.rglob("*.sealed"))


def test_a_second_export_that_writes_nothing_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db, archive = str(tmp_path / "s.db"), str(tmp_path / "archive")
    run(capsys, "--db", db, "demo")
    status, out, _ = run(capsys, "--db", db, "export", archive)
    assert status == 0
    assert out.startswith("exported 1 session (9 new entries, ")  # the demo stores 9
    status, out, err = run(capsys, "--db", db, "export", archive)
    assert (status, err) == (0, "")
    assert out == f"nothing new to export: 1 session, 1 journal, 0 heads already in {archive}\n"
    empty = str(tmp_path / "empty.db")
    run(capsys, "--db", empty, "migrate")
    status, out, _ = run(capsys, "--db", empty, "export", str(tmp_path / "none"))
    assert out.startswith("nothing to export to ")


@pytest.mark.parametrize("target", ["fresh.db", "fresh"], ids=["sqlite", "jsonl"])
def test_an_import_that_refuses_every_file_leaves_no_new_store(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "archive" / "sessions").mkdir(parents=True)
    (tmp_path / "archive" / "sessions" / "x.jsonl").write_text('{"broken\n')
    status, _, err = run(capsys, "--db", target, "import", "archive")
    assert status == 1
    assert err.endswith(f"import refused 1 file (listed above); {target} was not created\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive"]


def test_an_import_that_refuses_every_file_leaves_an_existing_store_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    run(capsys, "--db", db, "demo")
    (tmp_path / "archive" / "sessions").mkdir(parents=True)
    (tmp_path / "archive" / "sessions" / "x.jsonl").write_text('{"broken\n')
    status, _, err = run(capsys, "--db", db, "import", str(tmp_path / "archive"))
    assert status == 1
    assert err.endswith("import refused 1 file (listed above)\n")
    status, out, _ = run(capsys, "--db", db, "ls")
    assert (status, len(out.splitlines())) == (0, 2)


def test_journal_alone_lists_every_journal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    run(capsys, "--db", db, "demo")
    status, out, err = run(capsys, "--db", db, "journal")
    assert (status, err) == (0, "")
    assert out == "journal\tsessions\teffects\tin doubt\ndemo-agent\t2\t0\t0\n"


def test_an_encrypted_export_of_a_plain_store_names_the_store_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run(capsys, "--db", "s.db", "demo")
    status, out, err = run(capsys, "--db", "s.db", "export", "out", "--encrypted")
    assert (status, out) == (1, "")
    assert err == (
        "sessionstore: error: s.db is not encrypted: --encrypted keeps an encrypted store's "
        "sessions sealed; export this one without it\n"
    )
    assert not (tmp_path / "out").exists()
