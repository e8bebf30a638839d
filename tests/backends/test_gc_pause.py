"""Large loads hold the garbage collector, and always give it back."""

import gc
import threading
from pathlib import Path

import pytest

from sessionstore import CorruptSessionError, JsonlStore, SessionMeta
from sessionstore.backends.records import gc_paused
from sessionstore.testing.contract import message


def test_the_collector_is_held_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_a_failing_load_gives_the_collector_back(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session_id = await store.create(SessionMeta.new())
    await store.append(session_id, message("e1", "x"))
    with store.path(session_id).open("ab") as file:
        file.write(b"not json\n")
    with pytest.raises(CorruptSessionError):
        await store.load(session_id)
    assert gc.isenabled()


def test_overlapping_pauses_in_threads_restore_the_collector_once_all_end() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused():
            first_in.set()
            second_in.wait()
        first_out.set()

    def second() -> None:
        first_in.wait()
        with gc_paused():
            second_in.set()
            first_out.wait()
            seen.append(gc.isenabled())  # the first ended: still paused for us

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [False]
    assert gc.isenabled()
