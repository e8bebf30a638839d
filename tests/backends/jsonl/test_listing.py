"""JsonlStore listings beyond the contract: last activity is the file's time,
and a listing's order is kept in ``.listings/`` between its pages."""

import os
import time
from pathlib import Path

import pytest

from sessionstore import InvalidCursorError, JsonlStore, SessionMeta, SessionSummary, encode
from sessionstore.backends.cursors import Cursor, listing_kind
from sessionstore.backends.jsonl import listing
from sessionstore.testing.common import message, stream
from sessionstore.timestamps import rfc3339_of_ns
from tests.helpers import spawn_appender


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "store")


async def sessions(store: JsonlStore, count: int, owner: str | None = None) -> list[str]:
    """``count`` new sessions, created one after another: the last is newest."""
    ids = [f"s{n:02d}" for n in range(count)]
    for session_id in ids:
        await store.create(SessionMeta(id=session_id, owner=owner))
    return ids


def kept_orders(store: JsonlStore) -> list[str]:
    try:
        return sorted(os.listdir(store.directory / listing.LISTINGS))
    except FileNotFoundError:
        return []


def ids(page: list[SessionSummary]) -> list[str]:
    return [summary.id for summary in page]


async def every_page(
    store: JsonlStore, first: list[SessionSummary], limit: int, owner: str | None = None
) -> list[str]:
    """The ids of ``first`` and of every page after it."""
    listed, page = ids(first), first
    while len(page) == limit:
        page = await store.summaries(owner=owner, limit=limit, after=page[-1].cursor)
        listed += ids(page)
    return listed


# ---------------------------------------------------------------- last activity


async def test_last_activity_is_the_files_time_to_the_nanosecond(store: JsonlStore) -> None:
    await store.create(SessionMeta(id="s"))
    await store.append("s", message("e1", "x"))
    [summary] = await store.summaries()
    assert summary.last_activity == rfc3339_of_ns(os.stat(store.path("s")).st_mtime_ns)


async def test_writes_in_quick_succession_keep_their_order(store: JsonlStore) -> None:
    # Fifty appends here take a few milliseconds: within one tick of the
    # kernel's coarse clock, which alone would tie most of them.
    created = await sessions(store, 50)
    appended = created[1::2] + created[::2]
    for session_id in appended:
        await store.append(session_id, message("e1", "x"))
    assert ids(await store.summaries(limit=None)) == appended[::-1]


async def test_a_title_is_no_activity_and_an_empty_append_none(store: JsonlStore) -> None:
    await sessions(store, 2)
    await store.set_title("s00", "renamed")
    await store.append_many("s00", [])
    assert ids(await store.summaries()) == ["s01", "s00"]


# ---------------------------------------------------------------- kept orders


async def test_the_first_page_keeps_its_order_in_a_private_file(store: JsonlStore) -> None:
    await sessions(store, 3)
    await store.summaries(limit=1)
    [token] = kept_orders(store)
    kept = store.directory / listing.LISTINGS / token
    assert os.stat(kept).st_mode & 0o777 == 0o600
    assert os.stat(kept.parent).st_mode & 0o777 == 0o700
    await store.summaries(limit=2)  # the same order again: the same file
    assert kept_orders(store) == [token]
    await store.summaries(order="created", limit=1)  # another listing: another order
    assert len(kept_orders(store)) == 2


async def test_a_listing_by_creation_leaves_out_what_came_after_its_first_page(
    store: JsonlStore,
) -> None:
    await sessions(store, 4)
    first = await store.summaries(order="created", limit=2)
    old = SessionMeta(id="imported-old")  # created_at "" like the others: sorts by id
    await store.import_session(encode(old), stream([]))  # would sort last, on a later page
    page = await store.summaries(order="created", limit=2, after=first[-1].cursor)
    assert ids(first + page) == ["s03", "s02", "s01", "s00"]
    assert ids(await store.summaries(order="created"))[-1] == "imported-old"


async def test_an_empty_store_keeps_nothing(store: JsonlStore) -> None:
    assert await store.summaries() == []
    assert not store.directory.exists()


async def test_a_page_reads_only_its_sessions_whole(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sessions(store, 10)
    loaded: list[str] = []
    load = store.load

    async def counting(session_id: str) -> list[object]:
        loaded.append(session_id)
        return list(await load(session_id))

    monkeypatch.setattr(store, "load", counting)
    first = await store.summaries(limit=3)
    await store.summaries(limit=3, after=first[-1].cursor)
    assert loaded == ["s09", "s08", "s07", "s06", "s05", "s04"]


async def test_pages_stay_exact_while_another_process_writes(store: JsonlStore) -> None:
    await sessions(store, 30)
    first = await store.summaries(limit=7)
    order = ids(await store.summaries(limit=None))  # as the first page found it
    # Another process appends to sessions on every page, listed or not yet,
    # and creates one: nothing moves, nothing new comes in.
    target = str(store.directory)
    for session_id in ("s29", "s20", "s10", "s00"):
        appender = await spawn_appender(target, session_id, "w", 3)
        await appender.communicate()
        assert appender.returncode == 0
    await JsonlStore(store.directory).create(SessionMeta(id="new"))
    # And one appends to a session of the last page while the pages are read.
    running = await spawn_appender(target, "s03", "w", 200)
    listed = await every_page(store, first, 7)
    await running.communicate()
    assert running.returncode == 0
    assert listed == order
    # A new listing finds them where the writes put them.
    assert ids(await store.summaries(limit=6)) == ["s03", "new", "s00", "s10", "s20", "s29"]


async def test_sessions_erased_between_pages_drop_out_even_when_made_again(
    store: JsonlStore,
) -> None:
    await sessions(store, 6)
    first = await store.summaries(limit=2)
    other = JsonlStore(store.directory)
    await other.erase("s03", reason="asked")
    await other.erase("s00", reason="asked")
    await other.create(SessionMeta(id="s00"))  # often on the erased file's inode
    assert await every_page(store, first, 2) == ["s05", "s04", "s02", "s01"]


async def test_a_page_short_of_erased_sessions_is_filled_from_the_next(
    store: JsonlStore,
) -> None:
    await sessions(store, 6)
    first = await store.summaries(limit=2)
    await store.erase("s03", reason="asked")
    assert ids(await store.summaries(limit=2, after=first[-1].cursor)) == ["s02", "s01"]


async def test_an_order_unused_for_an_hour_is_swept_and_its_cursor_says_start_again(
    store: JsonlStore,
) -> None:
    await sessions(store, 3)
    first = await store.summaries(limit=1)
    [token] = kept_orders(store)
    hour_ago = time.time() - listing.KEPT_FOR - 1
    os.utime(store.directory / listing.LISTINGS / token, (hour_ago, hour_ago))
    await store.append("s00", message("e1", "x"))  # another order
    await store.summaries(limit=1)  # whose first page sweeps the old one
    assert token not in kept_orders(store)
    with pytest.raises(InvalidCursorError, match="start again"):
        await store.summaries(limit=1, after=first[-1].cursor)


async def test_each_page_keeps_its_order_another_hour(store: JsonlStore) -> None:
    await sessions(store, 3)
    first = await store.summaries(limit=1)
    [token] = kept_orders(store)
    path = store.directory / listing.LISTINGS / token
    os.utime(path, (time.time() - 600, time.time() - 600))
    await store.summaries(limit=1, after=first[-1].cursor)
    assert os.stat(path).st_mtime > time.time() - 60


async def test_only_the_last_orders_used_are_kept(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "KEPT_AT_MOST", 2)
    await sessions(store, 3)
    oldest = await store.summaries(limit=1)
    for session_id in ("s00", "s01"):  # two more orders
        await store.append(session_id, message("e1", "x"))
        await store.summaries(limit=1)
    assert len(kept_orders(store)) == 2
    with pytest.raises(InvalidCursorError, match="start again"):
        await store.summaries(limit=1, after=oldest[-1].cursor)


async def test_an_order_cut_short_reads_as_gone(store: JsonlStore) -> None:
    await sessions(store, 3)
    first = await store.summaries(limit=1)
    [token] = kept_orders(store)
    path = store.directory / listing.LISTINGS / token
    path.write_bytes(path.read_bytes()[:-5])  # a power loss after the rename
    with pytest.raises(InvalidCursorError, match="start again"):
        await store.summaries(limit=1, after=first[-1].cursor)


async def test_an_edited_cursor_is_refused_never_a_wrong_page(store: JsonlStore) -> None:
    await sessions(store, 2)
    [newest] = await store.summaries(limit=1)
    kind = listing_kind("summaries", "last_activity", None)
    cursor = Cursor.decode(newest.cursor, kind, length=2)
    assert cursor.key == ("1", "s01")
    edits = [
        Cursor(kind, "../../s00.jsonl", cursor.key),  # no file but a kept order's
        Cursor(kind, "0" * 32, cursor.key),  # an order never kept
        Cursor(kind, cursor.mark, ("1", "s00")),  # row 1 is another session
        Cursor(kind, cursor.mark, ("3", "s00")),  # there is no row 3
        Cursor(kind, cursor.mark, ("x", "s01")),
    ]
    for edited in edits:
        with pytest.raises(InvalidCursorError):
            await store.summaries(limit=1, after=edited.encode())
    assert ids(await store.summaries(limit=1, after=newest.cursor)) == ["s00"]


async def test_where_orders_cannot_be_written_the_store_object_keeps_them(
    store: JsonlStore,
) -> None:
    await sessions(store, 4)
    (store.directory / listing.LISTINGS).write_bytes(b"")  # no directory can go there
    first = await store.summaries(limit=2)
    await store.append("s03", message("e1", "x"))
    assert await every_page(store, first, 2) == ["s03", "s02", "s01", "s00"]
    with pytest.raises(InvalidCursorError, match="start again"):
        await JsonlStore(store.directory).summaries(limit=2, after=first[-1].cursor)


async def test_by_owner_only_that_owners_sessions_are_kept(store: JsonlStore) -> None:
    await sessions(store, 4, owner="ann")
    await store.create(SessionMeta(id="bob-1", owner="bob"))
    first = await store.summaries(owner="ann", limit=3)
    await store.append("bob-1", message("e1", "x"))
    assert await every_page(store, first, 3, "ann") == ["s03", "s02", "s01", "s00"]
    with pytest.raises(InvalidCursorError, match="another listing"):
        await store.summaries(limit=3, after=first[-1].cursor)
