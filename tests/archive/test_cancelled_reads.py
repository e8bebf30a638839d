"""An archive import cancelled while it reads a file of the archive: the file
is closed after the read still running in its thread, never beside it."""

import asyncio
import os
from pathlib import Path

import pytest

from sessionstore import JsonlStore
from sessionstore.archive import export_archive, import_archive
from sessionstore.testing.journal_contract import header
from tests.helpers import Hold, cancel_while_held, naming


async def test_an_archive_import_cancelled_mid_read_closes_the_file_after_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = JsonlStore(tmp_path / "source")
    await source.journal("j").append(header(0))
    await export_archive(source, tmp_path / "archive")
    await source.close()
    archived = tmp_path / "archive" / "journals" / "j" / "session_journal.jsonl"
    hold = Hold(os.read, naming(archived))
    monkeypatch.setattr(os, "read", hold)
    (tmp_path / "other").write_bytes(b"another file's bytes")
    target = JsonlStore(tmp_path / "target")
    importing_archive = asyncio.ensure_future(import_archive(target, tmp_path / "archive"))
    await cancel_while_held(importing_archive, hold, archived, tmp_path / "other")
    await target.close()
