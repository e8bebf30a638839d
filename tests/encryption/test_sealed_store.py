"""A store sealed by keys=: what its files hold, what an erase takes from every
copy, and the errors of keys that do not fit (docs/encryption.md)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from sessionstore import (
    CorruptSessionError,
    EncryptionKeyError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionStore,
    SqlStore,
    generate_key,
    open_store,
)
from tests.encryption.helpers import files_holding, fill
from tests.integrations import require
from tests.kinds import TEST_KEYS, StoreTargets

KEY = TEST_KEYS[0]


async def read_back(store: SessionStore, marker: str) -> None:
    """Every sealed field, read back whole with the key."""
    loaded = await store.load("s1")
    assert marker in loaded[0].message.text()  # type: ignore[union-attr]
    (summary,) = await store.summaries()
    assert summary.title == f"later {marker}"
    assert summary.meta.owner == f"owner{marker}"
    assert summary.meta.tags == (f"tag{marker}",)
    assert {hit.session_id for hit in await store.search(marker)} == {"s1"}
    assert marker.encode() in await store.journal("agent").read_bytes()


async def test_no_file_of_a_sealed_sqlite_store_holds_what_it_seals(
    tmp_path: Path, marker: str
) -> None:
    db = tmp_path / "store" / "s.db"
    db.parent.mkdir()
    async with open_store(db, keys=KEY) as store:
        await fill(store, marker)
        await read_back(store, marker)
        # Open, the write-ahead log and shared memory are there too.
        assert {path.name for path in db.parent.iterdir()} >= {"s.db", "s.db-wal", "s.db-shm"}
        assert files_holding(db.parent, marker) == []
    assert files_holding(db.parent, marker) == []
    async with open_store(db, keys=KEY) as store:  # and back, whole, with the key
        await read_back(store, marker)


async def test_no_file_of_a_sealed_postgresql_store_holds_what_it_seals(
    pg_url: str, tmp_path: Path, marker: str
) -> None:
    import psycopg

    async with open_store(pg_url, keys=KEY, keyring=str(tmp_path / "keys")) as store:
        await fill(store, marker)
        await read_back(store, marker)
    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("CHECKPOINT")  # every page of the tables written to their files
        row = connection.execute("SHOW data_directory").fetchone()
    assert row is not None
    data = Path(row[0])
    assert (data / "base").is_dir()
    assert files_holding(data, marker) == []  # table files, free space and the WAL too


async def test_a_copy_taken_before_an_erase_gives_back_the_others_but_not_the_erased(
    tmp_path: Path,
) -> None:
    db, copy = tmp_path / "s.db", tmp_path / "copy.db"
    async with open_store(db, keys=KEY) as store:
        for session_id in ("kept", "gone"):
            await store.create(SessionMeta(id=session_id))
            await store.append(session_id, MessageEntry.new(Message.user(f"{session_id} text")))
    shutil.copy(db, copy)  # checkpointed at close: the file holds it all
    async with open_store(db, keys=KEY) as store:
        record = await store.erase("gone", reason="asked")
    assert record.key is not None
    assert len(record.key) == 24
    # The copy, opened with the key and the current keyring.
    async with open_store(copy, keys=KEY, keyring=str(db) + ".keys") as old:
        assert "kept text" in (await old.load("kept"))[0].message.text()  # type: ignore[union-attr]
        with pytest.raises(CorruptSessionError, match="does not hold"):
            await old.load("gone")
        with pytest.raises(CorruptSessionError, match="does not hold"):
            [line async for line in old.raw_lines("gone")]


async def test_keys_that_do_not_fit_are_refused_clearly(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with open_store(db, keys=KEY) as store:
        await store.create(SessionMeta(id="s"))
    with pytest.raises(EncryptionKeyError, match="is encrypted: open it with keys="):
        await open_store(db)
    with pytest.raises(EncryptionKeyError, match="not by a key given"):
        await open_store(db, keys=generate_key())
    with pytest.raises(EncryptionKeyError, match="holds no keys of this store"):
        await open_store(db, keys=KEY, keyring=str(tmp_path / "another.keys"))
    plain = tmp_path / "plain.db"
    async with open_store(plain) as store:
        await store.create(SessionMeta(id="s"))
    with pytest.raises(EncryptionKeyError, match="holds plain sessions"):
        await open_store(plain, keys=KEY)
    assert not (tmp_path / "plain.db.keys").exists()  # refused before any keyring is made
    for target in ("memory://", str(tmp_path / "dir")):
        with pytest.raises(EncryptionKeyError, match="encryption at rest is for SQL stores"):
            await open_store(target, keys=KEY)
    with pytest.raises(EncryptionKeyError, match="keyring= is given without keys="):
        await open_store(plain, keyring=str(tmp_path / "k"))


async def test_a_postgresql_store_needs_a_keyring_named(pg_url: str) -> None:
    with pytest.raises(EncryptionKeyError, match="keyring must live apart"):
        await open_store(pg_url, keys=KEY)


@pytest.fixture
async def sealed(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(str(tmp_path / "s.db"), keys=KEY)
    yield store
    await store.close()


def raw(db: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(db, isolation_level=None)
    for trigger in ("entries_no_update", "sessions_no_update"):
        connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    return connection


async def test_a_row_moved_to_another_session_or_place_does_not_open(
    sealed: SqlStore, tmp_path: Path
) -> None:
    for session_id in ("a", "b"):
        await sealed.create(SessionMeta(id=session_id))
        await sealed.append_many(
            session_id, [MessageEntry.new(Message.user(f"{session_id} {n}")) for n in range(2)]
        )
    db = tmp_path / "s.db"
    with closing(raw(db)) as connection:
        pk = dict(connection.execute("SELECT id, pk FROM sessions").fetchall())
        (line,) = connection.execute(
            "SELECT line FROM entries WHERE session_pk = ? AND seq = 1", [pk["a"]]
        ).fetchone()
        # a's first line put in place of b's first, and of a's second.
        connection.execute(
            "UPDATE entries SET line = ? WHERE session_pk = ? AND seq = 1", [line, pk["b"]]
        )
        connection.execute(
            "UPDATE entries SET line = ? WHERE session_pk = ? AND seq = 2", [line, pk["a"]]
        )
    sealed.drop_caches()
    with pytest.raises(CorruptSessionError, match=r"session 'b'.*entry seq 1 does not open"):
        await sealed.load("b")
    with pytest.raises(CorruptSessionError, match=r"session 'a'.*entry seq 2 does not open"):
        await sealed.load("a")
    faults = await sealed.integrity()
    assert any("'a'" in fault and "entry seq 2 does not open" in fault for fault in faults)
    assert any("'b'" in fault and "entry seq 1 does not open" in fault for fault in faults)


async def test_an_erase_cut_short_after_its_commit_destroys_the_key_at_the_next_open(
    sealed: SqlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sealed.create(SessionMeta(id="s"))
    sealer = sealed.database.sealer
    assert sealer is not None

    def died(key_id: bytes) -> None:
        raise KeyboardInterrupt  # as a process killed between the commit and the key's end

    monkeypatch.setattr(sealer, "destroy", died)
    with pytest.raises(KeyboardInterrupt):
        await sealed.erase("s", reason="asked")
    assert (await sealed.keyring_report()).get("doomed") == 1
    monkeypatch.undo()
    async with await SqlStore.open(str(tmp_path / "s.db"), keys=KEY) as again:
        assert await again.keyring_report() == {sealer.keys.first: 1}  # the index key alone
        assert [record.name for record in await again.erasures()] == ["s"]


async def test_a_refused_erase_leaves_the_session_readable(sealed: SqlStore) -> None:
    await sealed.create(SessionMeta(id="s"))
    await sealed.append(
        "s", MessageEntry(id="e1", timestamp="2026-12-02T00:00:00Z", message=Message.user("x"))
    )
    await sealed.fork("s", meta=SessionMeta(id="f"))
    with pytest.raises(Exception, match="forks share its entries"):
        await sealed.erase("s", reason="asked")
    assert len(await sealed.load("s")) == 1
    assert (await sealed.erase("f", reason="asked")).key is not None
    assert len(await sealed.load("s")) == 1


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_exports_of_a_sealed_store_are_plain_and_import_back(
    kind: str, store_targets: StoreTargets, tmp_path: Path, marker: str
) -> None:
    from sessionstore.archive import export_archive, import_archive

    options = store_targets.options(f"{kind}-sealed")
    async with open_store(store_targets.new(kind), **options) as store:
        await fill(store, marker)
        await export_archive(store, tmp_path / "archive")
    assert files_holding(tmp_path / "archive", marker)  # plain, as the Rust reader reads it
    async with open_store(tmp_path / "plain.db") as plain:
        await import_archive(plain, tmp_path / "archive")
        await read_back(plain, marker)
    again = store_targets.options(f"{kind}-sealed")
    async with open_store(store_targets.new(kind), **again) as store:
        await import_archive(store, tmp_path / "archive")
        await read_back(store, marker)


def test_the_blocking_facade_opens_a_sealed_store_with_its_keys(tmp_path: Path) -> None:
    from sessionstore.sync import open_store as open_blocking

    with open_blocking(tmp_path / "s.db", keys=KEY) as store:
        store.create(SessionMeta(id="s"))
        store.append("s", MessageEntry.new(Message.user("kept sealed")))
    with open_blocking(tmp_path / "s.db", keys=KEY) as store:
        assert store.load("s")[0].message.text() == "kept sealed"  # type: ignore[union-attr]
    with pytest.raises(EncryptionKeyError):
        open_blocking(tmp_path / "s.db")


async def test_an_openai_agents_session_on_a_sealed_store(tmp_path: Path) -> None:
    require("agents", extra="openai-agents")
    from sessionstore.integrations.openai_agents import StoreSession

    db = tmp_path / "s.db"
    async with StoreSession.open(db, "chat", keys=KEY) as session:
        await session.add_items([{"role": "user", "content": "a sealed turn"}])
    async with StoreSession.open(db, "chat", keys=KEY) as session:
        assert await session.get_items() == [{"role": "user", "content": "a sealed turn"}]
    with open(db, "rb") as file:
        assert b"a sealed turn" not in file.read()


async def test_a_postgresql_store_refuses_its_own_database_as_its_keyring(pg_url: str) -> None:
    url = make_url(pg_url)
    other_schema = url.set(query={**url.query, "options": "-csearch_path=elsewhere"})
    for keyring in (pg_url, other_schema.render_as_string(hide_password=False)):
        with pytest.raises(EncryptionKeyError, match="is the store's own database"):
            await open_store(pg_url, keys=KEY, keyring=keyring)


async def test_a_sqlite_store_refuses_its_own_file_as_its_keyring(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    for keyring in (str(db), f"sqlite:///{db}", str(tmp_path / "." / "s.db")):
        with pytest.raises(EncryptionKeyError, match="is the store's own database"):
            await open_store(db, keys=KEY, keyring=keyring)


async def test_an_erase_of_a_session_holding_another_s_header_dooms_no_other_key(
    sealed: SqlStore, tmp_path: Path
) -> None:
    for session_id in ("a", "b"):
        await sealed.create(SessionMeta(id=session_id))
        await sealed.append(session_id, MessageEntry.new(Message.user(f"{session_id} said")))
    db = tmp_path / "s.db"
    with closing(raw(db)) as connection:  # a raw writer swaps the two sessions' headers
        headers = dict(connection.execute("SELECT id, header FROM sessions").fetchall())
        for one, other in (("a", "b"), ("b", "a")):
            connection.execute("UPDATE sessions SET header = ? WHERE id = ?", [headers[other], one])
    sealed.drop_caches()
    erased = await sealed.erase("a", reason="asked")  # erased as damaged: it does not open
    assert erased.key is None  # no key named, so none doomed: b's above all
    assert "doomed" not in await sealed.keyring_report()
    await sealed.close()
    async with await SqlStore.open(str(db), keys=KEY) as again:  # the open that swept b's key
        assert sum((await again.keyring_report()).values()) == 3  # the index, a's and b's
    with closing(raw(db)) as connection:  # b's own header put back: b reads as before
        connection.execute("UPDATE sessions SET header = ? WHERE id = 'b'", [headers["b"]])
    async with await SqlStore.open(str(db), keys=KEY) as again:
        (entry,) = await again.load("b")
        assert isinstance(entry, MessageEntry)
        assert entry.message.content == "b said"
        assert (await again.erase("b", reason="asked")).key is not None


async def test_a_doomed_key_no_erasure_names_is_kept_at_the_next_open(
    sealed: SqlStore, tmp_path: Path
) -> None:
    await sealed.create(SessionMeta(id="a"))
    await sealed.create(SessionMeta(id="b"))
    sealer = sealed.database.sealer
    assert sealer is not None
    b_key = await sealed.data_key("session", "b")
    assert b_key is not None
    sealer.keyring.doom(b_key.key_id)  # as an erase cut short before its commit
    with closing(raw(tmp_path / "s.db")) as connection:  # and b's header then moved to a
        (header,) = connection.execute("SELECT header FROM sessions WHERE id = 'a'").fetchone()
        connection.execute("UPDATE sessions SET header = ? WHERE id = 'b'", [header])
    async with await SqlStore.open(str(tmp_path / "s.db"), keys=KEY) as again:
        assert await again.keyring_report() == {sealer.keys.first: 3, "doomed": 1}
