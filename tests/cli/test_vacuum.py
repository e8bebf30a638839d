"""``sessionstore vacuum``: what it gave back, on every kind of store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sessionstore import SessionMeta, open_store
from sessionstore.testing.common import message
from tests.cli.helpers import run


async def fill_and_erase(db: Path) -> None:
    async with open_store(db) as store:
        for n in range(10):
            await store.create(SessionMeta(id=f"s{n}"))
            await store.append_many(f"s{n}", [message(f"s{n}-{i}", "x" * 4000) for i in range(20)])
        for n in range(1, 10):
            await store.erase(f"s{n}", reason="retention")


def test_vacuum_prints_the_size_before_and_after(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "sessions.db"
    asyncio.run(fill_and_erase(db))
    before = db.stat().st_size

    status, out, err = run(capsys, "--db", str(db), "vacuum")

    assert status == 0, err
    first, steps = out.splitlines()
    assert first.startswith(f"{db}: gave back ")
    assert " MB -> " in first
    assert " kB)" in first
    assert " pages in " in steps
    assert "steps" in steps
    assert db.stat().st_size < before / 2


def test_vacuum_of_a_jsonl_store_says_there_is_nothing_to_give_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = run(capsys, "--db", str(tmp_path), "vacuum")
    assert status == 0
    why = "a JSONL store's erase deletes the session's files at once"
    assert out == f"{tmp_path}: nothing to give back ({why})\n"


def test_vacuum_of_a_jsonl_store_removes_the_index_of_ids_an_earlier_version_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / ".ids" / ".firsts").mkdir(parents=True)
    (tmp_path / ".ids" / "s").write_bytes(b"x" * 3000)
    (tmp_path / ".ids" / ".firsts" / "s").write_bytes(b"x" * 750)

    status, out, err = run(capsys, "--db", str(tmp_path), "vacuum")

    assert status == 0, err
    first, detail = out.splitlines()
    assert first.startswith(f"{tmp_path}: gave back 3.8 kB (")
    assert (
        detail == "  removed the index of ids an earlier version kept (.ids/), which nothing reads"
    )
    assert not (tmp_path / ".ids").exists()


def test_vacuum_of_a_missing_database_is_refused_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run(capsys, "--db", str(tmp_path / "none.db"), "vacuum")
    assert status == 1
    assert "no such database" in err
    assert list(tmp_path.iterdir()) == []


def test_vacuum_full_runs_one_full_vacuum_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "sessions.db"
    asyncio.run(fill_and_erase(db))
    before = db.stat().st_size

    status, out, err = run(capsys, "--db", str(db), "vacuum", "--full")

    assert status == 0, err
    assert out.splitlines()[1].startswith("  a full VACUUM; the longest held writers off ")
    assert db.stat().st_size < before / 2
