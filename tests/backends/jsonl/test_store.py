"""JsonlStore beyond the contract: files, crash tails, corruption, locking."""

import logging
import stat
from pathlib import Path

import pytest

from sessionstore import (
    CorruptSessionError,
    InvalidSessionIdError,
    JsonlStore,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    StorageError,
    encode_line,
)
from sessionstore.backends.jsonl import store as jsonl_store
from sessionstore.testing.contract import INVALID_IDS, message
from tests.helpers import run_appenders


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path)


async def new_session(store: JsonlStore, *entries: MessageEntry) -> tuple[str, Path]:
    session_id = await store.create(SessionMeta.new())
    await store.append_many(session_id, entries)
    return session_id, store.path(session_id)


async def test_file_holds_the_header_then_one_canonical_line_per_entry(store: JsonlStore) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    entry = message("e1", "hello")
    await store.append(meta.id, entry)
    assert store.path(meta.id).read_bytes() == encode_line(meta) + encode_line(entry)


async def test_session_files_are_readable_by_their_owner_only(store: JsonlStore) -> None:
    _, path = await new_session(store)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_truncated_tail_is_dropped_repaired_and_appends_stay_aligned(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    e1 = message("e1", "hello")
    session_id, path = await new_session(store, e1)
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"type":"message","id":"e2')

    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert await store.load(session_id) == [e1]
    assert "crash-truncated" in caplog.text
    assert path.read_bytes() == intact

    e2, e3 = message("e2", "world"), message("e3", "again")
    await store.append(session_id, e2)
    await store.append(session_id, e3)
    assert await store.load(session_id) == [e1, e2, e3]


async def test_complete_json_after_the_last_newline_is_still_a_torn_tail(
    store: JsonlStore,
) -> None:
    e1 = message("e1", "hello")
    session_id, path = await new_session(store, e1)
    intact = path.read_bytes()
    path.write_bytes(intact + encode_line(message("e2", "x")).rstrip(b"\n"))
    assert await store.load(session_id) == [e1]
    assert path.read_bytes() == intact


async def test_append_after_a_crash_repairs_the_tail_without_a_load(store: JsonlStore) -> None:
    e1, e2 = message("e1", "a"), message("e2", "b")
    session_id, path = await new_session(store, e1)
    path.write_bytes(path.read_bytes() + b'{"type":"mess')
    await store.append(session_id, e2)
    assert await store.load(session_id) == [e1, e2]


async def test_torn_tail_with_a_cut_utf8_character_is_dropped(store: JsonlStore) -> None:
    e1 = message("e1", "a")
    session_id, path = await new_session(store, e1)
    path.write_bytes(path.read_bytes() + '{"type":"message","id":"é'.encode()[:-1])
    assert await store.load(session_id) == [e1]


async def test_a_file_whose_header_names_another_session_is_refused(
    store: JsonlStore,
) -> None:
    # The Rust store loads such a file by its path (docs/wire-format.md);
    # here a session is the one its file is found by, or none.
    path = store.directory / "named.jsonl"
    path.write_bytes(encode_line(SessionMeta(id="other")) + encode_line(message("e1", "x")))
    with pytest.raises(CorruptSessionError, match="header names session 'other'") as caught:
        await store.load("named")
    assert (caught.value.path, caught.value.line) == (str(path), 1)
    assert await store.list() == []


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (b"not json", "invalid JSON"),
        (b"", "invalid JSON"),
        (b'{"type":"message","id":"\xff"}', "invalid UTF-8"),
        (b'{"type":"vote","id":"x"}', "unknown type 'vote'"),
        (b"\xef\xbb\xbf" + encode_line(message("e9", "x")).rstrip(b"\n"), "byte-order mark"),
    ],
)
async def test_complete_bad_line_is_an_error_naming_session_file_and_line(
    store: JsonlStore, bad_line: bytes, reason: str
) -> None:
    session_id, path = await new_session(store, message("e1", "hello"))
    content = path.read_bytes()
    path.write_bytes(content + bad_line + b"\n")
    with pytest.raises(CorruptSessionError, match=reason) as caught:
        await store.load(session_id)
    error = caught.value
    assert (error.session_id, error.path, error.line) == (session_id, str(path), 3)
    assert path.read_bytes() == content + bad_line + b"\n"  # nothing dropped


@pytest.mark.parametrize("read", [1 << 20, 50, 7])  # the bad line in a later read
async def test_invalid_utf8_is_named_by_line_when_streamed(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch, read: int
) -> None:
    monkeypatch.setattr(jsonl_store, "READ", read)
    session_id, path = await new_session(store, message("e1", "hello"))
    content = path.read_bytes()
    path.write_bytes(
        content + b'{"type":"message","id":"\xff"}\n' + encode_line(message("e3", "x"))
    )
    for stream in (store.raw_blocks(session_id), store.raw_lines(session_id)):
        with pytest.raises(CorruptSessionError, match="invalid UTF-8 at byte 24") as caught:
            async for _ in stream:
                pass
        assert (caught.value.path, caught.value.line) == (str(path), 3)


async def test_bad_middle_line_is_an_error(store: JsonlStore) -> None:
    session_id, path = await new_session(store, message("e1", "hello"))
    header, entry = path.read_bytes().splitlines()
    path.write_bytes(header + b"\nnot json\n" + entry + b"\n")
    with pytest.raises(CorruptSessionError) as caught:
        await store.load(session_id)
    assert caught.value.line == 2


async def test_torn_header_leaves_an_empty_file_which_is_an_error(store: JsonlStore) -> None:
    session_id, path = await new_session(store)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(CorruptSessionError, match="missing header") as caught:
        await store.load(session_id)
    assert caught.value.path == str(path)
    assert path.read_bytes() == b""
    with pytest.raises(CorruptSessionError, match="missing header"):
        await store.append(session_id, message("e1", "x"))
    assert path.read_bytes() == b""


async def test_invalid_header_is_an_error_on_line_1(store: JsonlStore) -> None:
    session_id, path = await new_session(store, message("e1", "x"))
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b'{"id":5}\n' + lines[1] + b"\n")
    with pytest.raises(CorruptSessionError) as caught:
        await store.load(session_id)
    assert caught.value.line == 1


async def test_header_naming_another_session_is_an_error(store: JsonlStore) -> None:
    session_id, path = await new_session(store)
    path.write_bytes(encode_line(SessionMeta(id="someone-else")))
    with pytest.raises(CorruptSessionError, match="someone-else") as caught:
        await store.load(session_id)
    assert caught.value.line == 1


async def test_crlf_lines_load(store: JsonlStore) -> None:
    e1, e2 = message("e1", "a"), message("e2", "b")
    session_id, path = await new_session(store, e1, e2)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert await store.load(session_id) == [e1, e2]
    assert [m.id for m in await store.list()] == [session_id]


async def test_files_written_by_hand_in_any_valid_form_load(store: JsonlStore) -> None:
    store.directory.mkdir(exist_ok=True)
    (store.directory / "hand.jsonl").write_bytes(
        b'{ "created_at": "x", "id": "hand", "future": [1] }\n'
        b'{"message":{"content":"hi","role":"user"},"timestamp":"t","id":"e1","type":"message"}\n'
    )
    entries = await store.load("hand")
    assert [e.id for e in entries] == ["e1"]


async def test_unknown_session_errors_and_missing_directory_lists_nothing(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path / "never-created")
    with pytest.raises(SessionNotFoundError):
        await store.load("missing")
    with pytest.raises(SessionNotFoundError):
        await store.append("missing", message("e1", "x"))
    assert await store.list() == []
    assert not (tmp_path / "never-created").exists()


async def test_directory_is_created_on_first_create(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "a" / "b")
    await store.create(SessionMeta(id="s1"))
    assert (tmp_path / "a" / "b" / "s1.jsonl").is_file()


@pytest.mark.parametrize("bad_id", INVALID_IDS)
async def test_invalid_ids_touch_no_file(tmp_path: Path, bad_id: str) -> None:
    store = JsonlStore(tmp_path / "d")
    with pytest.raises(InvalidSessionIdError):
        await store.create(SessionMeta(id=bad_id))
    with pytest.raises(InvalidSessionIdError):
        await store.append(bad_id, message("e1", "x"))
    assert list(tmp_path.iterdir()) == []


async def test_listing_skips_bad_files_with_a_warning_and_ignores_others(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    good = SessionMeta.new()
    await store.create(good)
    directory = store.directory
    (directory / "empty.jsonl").write_bytes(b"")
    (directory / "garbage.jsonl").write_bytes(b"not json\n")
    (directory / "torn.jsonl").write_bytes(b'{"id":"torn"')
    (directory / "mismatch.jsonl").write_bytes(encode_line(SessionMeta(id="other")))
    (directory / ".hidden.jsonl").write_bytes(encode_line(SessionMeta(id=".hidden")))
    (directory / "dir.jsonl").mkdir()
    (directory / "notes.txt").write_bytes(b"not a session")
    (directory / "backup.jsonl.bak").write_bytes(encode_line(SessionMeta(id="backup.jsonl")))

    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert await store.list() == [good]
    for name in ("empty", "garbage", "torn", "mismatch", ".hidden", "dir"):
        assert f"{name}.jsonl" in caplog.text or repr(name) in caplog.text, name
    assert "notes.txt" not in caplog.text
    assert "backup" not in caplog.text


async def test_listing_reads_only_the_first_line(store: JsonlStore) -> None:
    session_id, path = await new_session(store, message("e1", "x"))
    with path.open("ab") as file:
        file.write(b"corrupt later line\n")
    assert [m.id for m in await store.list()] == [session_id]


async def test_os_errors_become_storage_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    store = JsonlStore(blocker / "sub")
    with pytest.raises(StorageError, match="sub"):
        await store.create(SessionMeta(id="s1"))
    with pytest.raises(StorageError) as caught:
        await store.list()
    assert isinstance(caught.value.__cause__, OSError)


async def test_full_durability_writes_the_same_bytes(tmp_path: Path) -> None:
    normal, full = JsonlStore(tmp_path / "n"), JsonlStore(tmp_path / "f", durability="full")
    meta, entry = SessionMeta.new(), message("e1", "x")
    for store in (normal, full):
        await store.create(meta)
        await store.append(meta.id, entry)
    assert normal.path(meta.id).read_bytes() == full.path(meta.id).read_bytes()


def test_unknown_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        JsonlStore(tmp_path, durability="sometimes")  # type: ignore[arg-type]


async def test_two_processes_appending_to_one_session_leave_every_line_whole(
    store: JsonlStore,
) -> None:
    session_id, path = await new_session(store)
    await run_appenders(str(store.directory), session_id, ["a", "b"], 1000)

    entries = await store.load(session_id)
    assert len(entries) == 2000
    texts = [e.message.text() for e in entries if isinstance(e, MessageEntry)]
    for name in ("a", "b"):
        own = [int(t.split(":")[1]) for t in texts if t.startswith(f"{name}:")]
        assert own == list(range(1000))
    assert len(path.read_bytes().splitlines()) == 2001
