"""The blocking facade beyond the contract: threads, loops, closing, errors."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from sessionstore import (
    ConfigurationError,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    StorageError,
    encode,
)
from sessionstore.sync import open_store
from sessionstore.testing.contract import message


def sync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sessionstore-sync"]


def test_a_journals_keyed_lines_block_too(tmp_path: Path) -> None:
    with open_store(tmp_path / "k.db") as store:
        journal = store.journal("agent")
        journal.append_raw(b'{"key":"t:1"}', b'{"key":"t:2"}')
        assert journal.keyed("t:1") == {"t:1": [b'{"key":"t:1"}']}
        assert [key for key, _ in journal.scan("t:", limit=1)] == ["t:2"]
        found = journal.append_keyed_unless(["t:3"], lambda held: held or None, b'{"key":"t:3"}')
        assert found is None
        record = journal.drop("t:1", "t:3", reason="pruned")
        assert record is not None
        assert (record.lines, record.keys) == (2, 2)
        assert journal.read_bytes() == b'{"key":"t:2"}\n'


def test_a_script_stores_and_reads_without_an_event_loop(tmp_path: Path) -> None:
    before = len(sync_threads())
    with open_store(tmp_path / "s.db") as store:
        session_id = store.create(SessionMeta.new())
        store.append_many(session_id, [message("e1", "a"), message("e2", "b")])
        assert [e.id for e in store.iter_entries(session_id)] == ["e1", "e2"]
        fork = store.fork(session_id, at="e1")
        store.set_head("chat", fork.id)
        assert store.load(store.head("chat") or "") == [message("e1", "a")]
        journal = store.journal("agent")
        journal.append_raw(b"line")
        assert journal.read_bytes() == b"line\n"
    assert len(sync_threads()) == before  # its loop's thread is gone
    with pytest.raises(StorageError, match="closed"):
        store.load(session_id)
    store.close()  # twice is fine


def test_many_threads_share_one_sync_store(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        session_id = store.create(SessionMeta(id="s"))

        def work(name: str) -> None:
            for n in range(50):
                store.append(session_id, message(f"{name}-{n}", name))

        threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        entries = store.load(session_id)
        assert len(entries) == 400
        for name in (f"t{n}" for n in range(8)):
            assert [e.id for e in entries if e.id.startswith(name + "-")] == [
                f"{name}-{n}" for n in range(50)
            ]
        assert store.integrity() == []


def test_it_may_be_called_from_code_inside_an_event_loop(tmp_path: Path) -> None:
    async def handler() -> list[str]:  # a sync helper called from an async view
        with open_store(tmp_path / "jsonl") as store:
            store.create(SessionMeta(id="s"))
            store.append("s", message("e1", "x"))
            return [e.id for e in store.load("s")]

    assert asyncio.run(handler()) == ["e1"]


def test_a_closed_store_leaves_no_thread_its_effects_ran_in(tmp_path: Path) -> None:
    before = {thread.ident for thread in threading.enumerate()}
    ran_in: list[str] = []
    with open_store(tmp_path / "e.db") as store:
        effects = store.journal("effects").effects
        effects.once(lambda: ran_in.append(threading.current_thread().name), tool="t", key="k")
    assert ran_in
    assert ran_in[0] != threading.current_thread().name  # in a thread of the store's loop
    for thread in threading.enumerate():
        if thread.ident not in before:
            thread.join(timeout=30)  # an idle thread ends once told, not when the process does
    assert {thread.ident for thread in threading.enumerate()} <= before


def test_errors_are_the_stores_and_a_failed_open_leaves_no_thread(tmp_path: Path) -> None:
    before = len(sync_threads())
    with pytest.raises(ConfigurationError):
        open_store("nosuch://x")
    assert len(sync_threads()) == before
    with open_store("memory://") as store, pytest.raises(SessionNotFoundError, match="ghost"):
        store.load("ghost")


def test_a_stream_left_unfinished_lets_go_and_an_import_reads_any_iterable(
    tmp_path: Path,
) -> None:
    lines = [encode(message(f"e{n}", "x")) for n in range(5)]
    (tmp_path / "lines.jsonl").write_text("".join(line + "\n" for line in lines))
    with open_store(tmp_path / "s.db") as store:
        header = encode(SessionMeta(id="imported"))
        with (tmp_path / "lines.jsonl").open() as file:
            assert store.import_session(header, (line.rstrip("\n") for line in file)) == 5
        stream = store.raw_lines("imported")
        assert next(stream) == header
        stream.close()  # its cursor is let go; the store goes on
        assert list(store.raw_lines("imported")) == [header, *lines]


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_closing_ends_every_call_in_flight_with_a_clear_error(tmp_path: Path, kind: str) -> None:
    target = {"memory": "memory://", "jsonl": str(tmp_path / "j"), "sqlite": str(tmp_path / "s.db")}
    store = open_store(target[kind])
    session_id = store.create(SessionMeta(id="long"))
    store.append_many(session_id, [message(f"e{n}", "x" * 200) for n in range(2000)])
    outcomes: list[str] = []
    started = threading.Barrier(9)

    def read(use: str) -> None:
        started.wait()
        try:
            while True:  # streams and plain calls, until the store is closed
                if use == "stream":
                    for _ in store.raw_lines(session_id):
                        pass
                else:
                    store.append(session_id, message(f"{use}-{threading.get_ident()}", "y"))
        except StorageError as exc:
            outcomes.append(f"closed: {exc}")
        except BaseException as exc:  # anything else is a failure of the test
            outcomes.append(f"unexpected: {exc!r}")

    threads = [
        threading.Thread(target=read, args=("stream" if n % 2 else "append",), daemon=True)
        for n in range(8)
    ]
    for thread in threads:
        thread.start()
    started.wait()
    store.close()
    for thread in threads:
        thread.join(timeout=120)  # a guard against a hang, never reached when it works
    assert not [thread for thread in threads if thread.is_alive()], "a caller hangs"
    assert len(outcomes) == 8
    assert all(outcome.startswith("closed: ") for outcome in outcomes), outcomes
    assert all("closed" in outcome.removeprefix("closed: ") for outcome in outcomes)
    store.close()  # twice is fine


def test_run_awaits_async_code_on_the_store_underneath(tmp_path: Path) -> None:
    async def two_steps(store: SessionStore) -> list[str]:
        session_id = await store.create(SessionMeta(id="s"))
        await store.append(session_id, message("e1", "x"))
        return [entry.id for entry in await store.load(session_id)]

    with open_store(tmp_path / "s.db") as store:
        assert store.run(two_steps) == ["e1"]
        with pytest.raises(SessionNotFoundError):
            store.run(lambda async_store: async_store.load("ghost"))
    with pytest.raises(StorageError, match="closed"):
        store.run(two_steps)
