"""A sealed store's journal keys: tokens in the database, the order kept by
the store object, caught up with what any other store object writes."""

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SqlStore, open_store
from sessionstore.encryption.sealer import Sealer
from tests.kinds import SEALED_KINDS, StoreTargets


def keyed(key: str) -> bytes:
    return f'{{"key":"{key}"}}'.encode()


def keys_of(scanned: list[tuple[str, list[bytes]]]) -> list[str]:
    return [key for key, _ in scanned]


@pytest.mark.parametrize("kind", SEALED_KINDS)
async def test_a_scan_is_caught_up_with_another_stores_writes(
    kind: str, store_targets: StoreTargets
) -> None:
    target, options = store_targets.new(kind), store_targets.options(kind)
    async with (
        await open_store(target, **options) as reader,
        await open_store(target, **options) as writer,
    ):
        seen, written = reader.journal("agent"), writer.journal("agent")
        await written.append_raw(keyed("t:1"), keyed("t:2"), keyed("u:1"))
        assert keys_of(await seen.scan("t:")) == ["t:2", "t:1"]
        await written.append_raw(keyed("t:3"))
        assert keys_of(await seen.scan("t:", limit=2)) == ["t:3", "t:2"]
        await written.drop("t:2", reason="pruned")
        assert keys_of(await seen.scan("t:")) == ["t:3", "t:1"]
        await written.clear()
        await written.append_raw(keyed("t:4"))
        assert await seen.scan("") == [("t:4", [keyed("t:4")])]


async def test_a_second_scan_opens_only_the_lines_it_returns(
    tmp_path: Path, store_targets: StoreTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = store_targets.options("sqlite-sealed")
    async with await open_store(tmp_path / "s.db", **options) as store:
        assert isinstance(store, SqlStore)
        journal = store.journal("agent")
        await journal.append_raw(*(keyed(f"t:{n:04}") for n in range(500)))
        assert len(await journal.scan("t:", limit=3)) == 3  # built: every line opened
        opened = 0
        sealer_open = Sealer.open

        def counted(self: Sealer, *args: Any, **kwargs: Any) -> bytes:
            nonlocal opened
            opened += 1
            return sealer_open(self, *args, **kwargs)

        monkeypatch.setattr(Sealer, "open", counted)
        await journal.append_raw(keyed("t:9999"))
        assert keys_of(await journal.scan("t:", limit=3)) == ["t:9999", "t:0499", "t:0498"]
        assert opened == 1 + 3  # the new line, and the lines returned
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        stored = {key for (key,) in connection.execute("SELECT key FROM journal_keys")}
    assert len(stored) == 501
    assert not any(key.startswith("t:") for key in stored)  # tokens, never the keys
