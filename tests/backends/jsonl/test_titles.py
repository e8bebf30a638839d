"""Titles in a JsonlStore beyond the contract: ``titles/<id>.jsonl``, crashes, erase."""

import asyncio
import logging
import os
from pathlib import Path

import pytest

from sessionstore import (
    CorruptSessionError,
    JsonlStore,
    SessionMeta,
    SessionNotFoundError,
    TitleChange,
    encode_line,
)
from sessionstore.backends.jsonl.titles import TITLES
from sessionstore.testing.contract import message
from tests.backends.jsonl.helpers import erase_dying_before_the_unlink


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "store")


def titles_file(store: JsonlStore, session_id: str) -> Path:
    return store.directory / TITLES / f"{session_id}.jsonl"


async def test_each_title_is_a_line_of_the_sessions_file_of_titles(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s", title="draft"))
    first = await store.set_title("s", "Trip to Lisbon")
    second = await store.set_title("s", None)
    assert titles_file(store, "s").read_bytes() == encode_line(first) + encode_line(second)
    assert os.stat(titles_file(store, "s")).st_mode & 0o777 == 0o600
    assert os.stat(titles_file(store, "s").parent).st_mode & 0o777 == 0o700
    assert await JsonlStore(store.directory).titles("s") == [first, second]


async def test_a_title_torn_by_a_crash_is_dropped_then_cut_before_the_next(
    store: JsonlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.create(SessionMeta(id="s"))
    kept = await store.set_title("s", "kept")
    path = titles_file(store, "s")
    with path.open("ab") as file:  # what a crash in the middle of the write leaves
        file.write(b'{"session_id":"s","title":"half')
    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert await store.titles("s") == [kept]
    assert "crash-truncated" in caplog.text
    later = await store.set_title("s", "later")  # never fused onto the torn bytes
    assert path.read_bytes() == encode_line(kept) + encode_line(later)
    [summary] = await store.summaries()
    assert summary.title == "later"


async def test_a_title_line_that_does_not_decode_is_named_and_faults_only_its_session(
    store: JsonlStore,
) -> None:
    for session_id in ("bad", "good"):
        await store.create(SessionMeta(id=session_id, title="header title"))
    await store.set_title("bad", "fine")
    with titles_file(store, "bad").open("ab") as file:
        file.write(b"not json\n")
    with pytest.raises(CorruptSessionError) as caught:
        await store.titles("bad")
    assert (caught.value.path, caught.value.line) == (str(titles_file(store, "bad")), 2)
    [fault] = await store.integrity()
    assert str(titles_file(store, "bad")) in fault
    summaries = {summary.id: summary for summary in await store.summaries()}
    assert summaries["good"].fault is None
    assert summaries["good"].title == "header title"
    assert summaries["bad"].fault is not None
    assert "line 2" in summaries["bad"].fault
    assert summaries["bad"].title == "header title"  # what can be told


async def test_a_line_naming_another_session_is_corrupt(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    await store.create(SessionMeta(id="t"))
    other = await store.set_title("t", "t's")
    titles_file(store, "s").parent.mkdir(exist_ok=True)
    titles_file(store, "s").write_bytes(encode_line(other))
    with pytest.raises(CorruptSessionError, match="a title change of session 't'"):
        await store.titles("s")


async def test_a_fork_gets_a_file_of_titles_of_its_own_its_header_none(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="s", title="first"))
    await store.set_title("s", "renamed")
    fork = await store.fork("s")
    assert fork.title is None
    [change] = await store.titles(fork.id)
    assert titles_file(store, fork.id).read_bytes() == encode_line(change)
    assert change.title == "renamed"


async def test_erase_removes_the_titles_and_the_id_made_again_has_none(
    store: JsonlStore,
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.set_title("s", "secret title")
    await store.erase("s", reason="asked")
    assert not titles_file(store, "s").exists()
    await store.create(SessionMeta(id="s"))
    assert await store.titles("s") == []


async def test_an_erase_that_died_before_the_unlink_already_took_the_titles(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create(SessionMeta(id="s"))
    await store.set_title("s", "secret title")
    await erase_dying_before_the_unlink(store, monkeypatch, reason="r")
    # The erase is unfinished: the session is still there, its titles are not,
    # and no file of titles is ever left without its session.
    assert store.path("s").exists()
    assert not titles_file(store, "s").exists()
    [record] = await store.erasures()
    assert await store.erase("s", reason="again") == record
    assert not store.path("s").exists()
    assert await store.integrity() == []


async def test_titles_of_no_session_are_a_fault(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    await store.set_title("s", "t")
    store.path("s").unlink()  # behind the store's back
    [fault] = await store.integrity()
    assert "the titles of no session" in fault


async def test_set_title_on_an_erased_session_writes_nothing(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    await store.erase("s", reason="r")
    with pytest.raises(SessionNotFoundError):
        await store.set_title("s", "late")
    with pytest.raises(SessionNotFoundError):
        await store.import_titles("s", [])
    assert not titles_file(store, "s").exists()


async def test_titles_racing_an_erase_are_erased_with_it_or_refused(store: JsonlStore) -> None:
    for round_ in range(20):
        session_id = f"s{round_}"
        await store.create(SessionMeta(id=session_id))
        await store.append(session_id, message("e1", "x"))
        setting = [asyncio.create_task(store.set_title(session_id, f"t{n}")) for n in range(10)]
        await store.erase(session_id, reason="r")
        for task in await asyncio.gather(*setting, return_exceptions=True):
            assert not isinstance(task, BaseException) or isinstance(task, SessionNotFoundError)
        assert not titles_file(store, session_id).exists()
    assert await store.integrity() == []


async def test_import_titles_appends_only_after_the_count_given(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    first = await store.set_title("s", "one")
    second = TitleChange.new("s", "two")
    other = JsonlStore(store.directory)
    assert await other.import_titles("s", [second], after=0) == 0  # it holds one already
    assert await other.import_titles("s", [second], after=1) == 1
    assert await store.titles("s") == [first, second]
