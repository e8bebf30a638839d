"""The archive: lossless export and import across every backend (SPEC section 6)."""

import asyncio
import contextlib
import shutil
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessionstore import (
    ArchiveError,
    Journal,
    Message,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    encode_line,
    open_store,
)
from sessionstore.archive import ArchiveReport, export_archive, import_archive
from sessionstore.testing.contract import compaction, message
from sessionstore.testing.effects_contract import Crash
from sessionstore.testing.journal_contract import header, post
from tests.archive.helpers import tree
from tests.forks import SESSIONS as FORK_SESSIONS
from tests.forks import fill_forks
from tests.helpers import ROOT
from tests.kinds import STORE_KINDS, StoreTargets

FIXTURE = ROOT / "tests" / "data" / "archive"
SERDE_ID = "2b8f0c52-6f7e-4c3a-9d7b-5f0e1a2b3c4d"


@pytest.fixture(params=STORE_KINDS)
async def store(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(request.param)) as opened:
        yield opened


async def fill(store: SessionStore) -> None:
    """Sessions made through the API, forks of every shape and two heads moved
    among them (`tests.forks`), plus the hand-written fixture archive."""
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append_many(
        meta.id, [message("e1", "hello"), message("e2", "world"), compaction("c1", "s", "e2")]
    )
    await store.create(SessionMeta(id="empty-session"))
    await store.journal("agent-2").begin(header(0), Journal())
    await store.journal("agent-2").append(post(1))
    effects = store.journal("agent-2").effects  # side effects, one done, one in doubt
    await effects.once(lambda: {"id": "m-1"}, tool="send", args={"to": "a"}, key="k1")
    with contextlib.suppress(Crash):
        await effects.once(_crash, tool="charge", args={"cents": 5}, session="s", key="k2")
    await fill_forks(store)
    for session_id in ("root", "middle", "deep", "middle"):
        await store.set_head("chat", session_id)
    await store.set_head("sub-agent", "from-imported")
    await import_archive(store, FIXTURE)


def _crash() -> None:
    raise Crash


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("source", STORE_KINDS)
@pytest.mark.parametrize("destination", STORE_KINDS)
async def test_export_import_export_is_byte_identical_across_backends(
    tmp_path: Path, source: str, destination: str, store_targets: StoreTargets
) -> None:
    async with open_store(store_targets.new(source)) as first:
        await fill(first)
        await export_archive(first, tmp_path / "one")
    async with open_store(store_targets.new(destination)) as second:
        await import_archive(second, tmp_path / "one")
        await export_archive(second, tmp_path / "two")
        assert await second.integrity() == []
        effects = {
            state.key: state.state for state in await second.journal("agent-2").effects.read()
        }
        assert effects == {"k1": "done", "k2": "in doubt"}
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    assert "journals/agent-2/session_effects.jsonl" in tree(tmp_path / "one")
    assert len(tree(tmp_path / "one")) == 7 + len(FORK_SESSIONS) + 2  # and two heads


async def test_imported_fixture_exports_back_identical(store: SessionStore, tmp_path: Path) -> None:
    report = await import_archive(store, FIXTURE)
    assert (report.sessions, report.journals, report.entries) == (2, 1, 9)
    assert report.bytes == sum(len(data) for data in tree(FIXTURE).values())
    await export_archive(store, tmp_path / "out")
    assert tree(tmp_path / "out") == tree(FIXTURE)


async def test_imported_history_is_kept_even_what_the_api_refuses(store: SessionStore) -> None:
    await import_archive(store, FIXTURE)
    entries = await store.load(SERDE_ID)
    last = entries[-1]
    assert isinstance(last, MessageEntry)
    assert last.message.streaming  # kept: an archive is history
    hand = await store.load("hand-written")
    assert [e.id for e in hand] == ["h1", "h2", "c1"]
    journal = await store.journal("agent-1").read()
    assert journal.skipped == [3, 5, 7]
    assert journal.writes() == 2


async def test_huge_lines_travel_intact(store: SessionStore, tmp_path: Path) -> None:
    meta = SessionMeta.new()
    await store.create(meta)
    await store.append(meta.id, MessageEntry.new(Message.user("é" * 3_000_000)))
    await export_archive(store, tmp_path / "one")
    async with open_store("memory://") as other:
        await import_archive(other, tmp_path / "one")
        await export_archive(other, tmp_path / "two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


# ---------------------------------------------------------------- import rules


async def test_import_never_writes_its_source(store: SessionStore, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(FIXTURE, source)
    torn = source / "sessions" / "torn.jsonl"
    torn.write_bytes(b'{"id":"torn"}\n' + message_line("t1") + b'{"type":"mess')
    before = tree(source)
    report = await import_archive(store, source)
    assert tree(source) == before  # the torn tail is not truncated
    assert [str(w) for w in report.warnings] == [f"{torn} line 3: torn last line skipped"]
    assert [e.id for e in await store.load("torn")] == ["t1"]


def message_line(entry_id: str) -> bytes:
    return (
        b'{"type":"message","id":"' + entry_id.encode() + b'","timestamp":"t",'
        b'"message":{"role":"user","content":"x"}}\n'
    )


async def test_importing_the_same_archive_again_changes_nothing(
    store: SessionStore, tmp_path: Path
) -> None:
    await import_archive(store, FIXTURE)
    await export_archive(store, tmp_path / "before")
    again = await import_archive(store, FIXTURE)
    assert (again.sessions, again.entries, again.journals) == (2, 0, 1)
    await export_archive(store, tmp_path / "after")
    assert tree(tmp_path / "after") == tree(tmp_path / "before")


async def test_a_file_extending_an_imported_session_adds_only_its_new_entries(
    store: SessionStore, tmp_path: Path
) -> None:
    source = tmp_path / "src" / "sessions"
    source.mkdir(parents=True)
    head = b'{"id":"grow"}\n' + message_line("g1") + message_line("g2")
    (source / "grow.jsonl").write_bytes(head)
    await import_archive(store, tmp_path / "src")
    (source / "grow.jsonl").write_bytes(head + message_line("g3") + message_line("g4"))
    report = await import_archive(store, tmp_path / "src")
    assert report.entries == 2
    assert [e.id for e in await store.load("grow")] == ["g1", "g2", "g3", "g4"]
    # An older, shorter copy adds nothing and is no conflict.
    (source / "grow.jsonl").write_bytes(head)
    assert (await import_archive(store, tmp_path / "src")).entries == 0


async def test_conflicting_and_invalid_files_are_refused_and_the_rest_imports(
    store: SessionStore, tmp_path: Path
) -> None:
    await store.create(SessionMeta(id="mine"))
    await store.append(SessionMeta(id="mine").id, message("m1", "x"))
    source = tmp_path / "src" / "sessions"
    source.mkdir(parents=True)
    mine = await export_lines(store, "mine")
    (source / "mine.jsonl").write_bytes(mine[0] + message_line("other"))
    (source / "bad.jsonl").write_bytes(
        b'{"id":"bad"}\n' + message_line("b1") + b"not json\n" + message_line("b3")
    )
    (source / "renamed.jsonl").write_bytes(b'{"id":"someone-else"}\n')
    (source / "empty.jsonl").write_bytes(b"")
    (source / "fine.jsonl").write_bytes(b'{"id":"fine"}\n' + message_line("f1"))
    before = await export_lines(store, "mine")

    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, tmp_path / "src")
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    refused = {Path(issue.file).name: (issue.line, issue.reason) for issue in report.refused}
    assert refused["mine.jsonl"] == (2, "differs from the stored session")
    assert refused["bad.jsonl"][0] == 3
    assert "invalid JSON" in refused["bad.jsonl"][1]
    assert refused["renamed.jsonl"][0] == 1
    assert "someone-else" in refused["renamed.jsonl"][1]
    assert refused["empty.jsonl"][0] == 1
    assert "bad.jsonl line 3" in str(caught.value)

    assert await export_lines(store, "mine") == before  # untouched
    with pytest.raises(SessionNotFoundError):
        await store.load("bad")  # all or nothing
    assert [e.id for e in await store.load("fine")] == ["f1"]  # the rest imported


async def export_lines(store: SessionStore, session_id: str) -> list[bytes]:
    return [(line + "\n").encode() async for line in store.raw_lines(session_id)]


async def test_a_conflicting_journal_is_refused(store: SessionStore, tmp_path: Path) -> None:
    await store.journal("agent-1").append_raw(b"something else")
    with pytest.raises(ArchiveError, match="differs from the stored journal"):
        await import_archive(store, FIXTURE)
    assert (await store.journal("agent-1").read()).skipped == [1]
    assert sorted(s.id for s in await store.list()) == sorted([SERDE_ID, "hand-written"])


async def test_a_directory_that_is_no_archive_is_refused(
    store: SessionStore, tmp_path: Path
) -> None:
    with pytest.raises(ArchiveError, match="not an archive"):
        await import_archive(store, tmp_path)


async def test_progress_is_reported_in_both_directions(store: SessionStore, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    await import_archive(store, FIXTURE, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    seen.clear()
    await export_archive(store, tmp_path / "out", progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # a journal's effects are a file's step


# ---------------------------------------------------------------- export rules


async def test_export_of_chosen_sessions_only(store: SessionStore, tmp_path: Path) -> None:
    await import_archive(store, FIXTURE)
    report = await export_archive(store, tmp_path / "out", sessions=["hand-written"])
    assert (report.sessions, report.journals) == (1, 0)
    assert list(tree(tmp_path / "out")) == ["sessions/hand-written.jsonl"]
    with pytest.raises(SessionNotFoundError):
        await export_archive(store, tmp_path / "out", sessions=["missing"])


async def test_incremental_export_appends_only_what_the_file_lacks(
    store: SessionStore, tmp_path: Path
) -> None:
    await import_archive(store, FIXTURE)
    out = tmp_path / "out"
    await export_archive(store, out)
    serde_file = out / "sessions" / f"{SERDE_ID}.jsonl"
    untouched = (out / "sessions" / "hand-written.jsonl").stat()
    await store.append(SERDE_ID, message("later", "x"))
    report = await export_archive(store, out)
    assert report.entries == 1
    later = (await store.load(SERDE_ID))[-1]
    original = (FIXTURE / "sessions" / serde_file.name).read_bytes()
    assert serde_file.read_bytes() == original + encode_line(later)
    after = (out / "sessions" / "hand-written.jsonl").stat()
    assert (after.st_ino, after.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns)
    assert (await export_archive(store, out)).entries == 0


async def test_export_refuses_a_file_that_is_not_a_prefix_and_keeps_it(
    store: SessionStore, tmp_path: Path
) -> None:
    await import_archive(store, FIXTURE)
    out = tmp_path / "out"
    await export_archive(store, out)
    stale = out / "sessions" / "hand-written.jsonl"
    stale.write_bytes(stale.read_bytes().replace(b"odd key order", b"ODD KEY ORDER"))
    longer = out / "sessions" / f"{SERDE_ID}.jsonl"
    longer.write_bytes(longer.read_bytes() + message_line("extra"))
    before = tree(out)
    with pytest.raises(ArchiveError) as caught:
        await export_archive(store, out)
    refused = {Path(i.file).name: i.line for i in caught.value.report.refused}  # type: ignore[attr-defined]
    assert refused == {"hand-written.jsonl": 2, f"{SERDE_ID}.jsonl": 8}
    assert tree(out) == before


# ---------------------------------------------------------------- streaming


def write_archive(root: Path, sessions: int, entries: int) -> int:
    """An archive of canonical session files, written directly; its size in bytes."""
    directory = root / "sessions"
    directory.mkdir(parents=True)
    text = "some text of a realistic length " * 3
    size = 0
    for s in range(sessions):
        lines = [f'{{"id":"s{s}","version":1,"created_at":""}}']
        lines += [
            f'{{"type":"message","id":"e{n}","timestamp":"2026-11-30T02:49:27+00:00",'
            f'"message":{{"role":"user","content":"{text}{n}"}}}}'
            for n in range(entries)
        ]
        data = ("\n".join(lines) + "\n").encode()
        (directory / f"s{s}.jsonl").write_bytes(data)
        size += len(data)
    return size


ROUND_TRIP = textwrap.dedent(
    """
    import asyncio, re, sys
    from sessionstore import open_store
    from sessionstore.archive import export_archive, import_archive

    async def main(target, archive, again, entries):
        async with open_store(target) as store:
            await import_archive(store, archive)
            await export_archive(store, again)
            streamed = 0
            async for entry in store.iter_entries("s0"):
                streamed += 1
            assert streamed == int(entries), streamed

    asyncio.run(main(*sys.argv[1:]))
    # The peak resident size of this process since its exec (getrusage's
    # would include the parent's, on Linux).
    status = open("/proc/self/status").read()
    print(int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) * 1024)
    """
)


async def peak_round_trip(target: str, where: Path, entries: int) -> int:
    """Import into ``target``, export, then stream an archive of ``entries`` in a
    fresh process; its peak RSS."""
    size = write_archive(where / "archive", 1, entries)
    assert size > entries * 150
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ROUND_TRIP,
        target,
        str(where / "archive"),
        str(where / "again"),
        str(entries),
        stdout=asyncio.subprocess.PIPE,
    )
    stdout, _ = await child.communicate()
    assert child.returncode == 0
    assert tree(where / "again") == tree(where / "archive")
    return int(stdout)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_memory_stays_flat_over_80000_entries_imported_exported_streamed(
    tmp_path: Path, kind: str, store_targets: StoreTargets
) -> None:
    small = await peak_round_trip(store_targets.new(kind), tmp_path / "small", 10_000)
    large = await peak_round_trip(store_targets.new(kind), tmp_path / "large", 80_000)
    # Eight times the archive (some 12 MB more, which a process holding its
    # lines would hold again, and several times that as decoded entries)
    # costs a few megabytes at most.
    assert large - small < 8_000_000, (small, large)


EXPORTER = textwrap.dedent(
    """
    import asyncio, sys
    from sessionstore import open_store
    from sessionstore.archive import export_archive

    async def main():
        async with open_store(sys.argv[1]) as store:
            print("start", flush=True)
            await export_archive(store, sys.argv[2])

    asyncio.run(main())
    """
)


async def test_a_kill_during_export_leaves_no_partial_file_under_a_final_name(
    tmp_path: Path,
) -> None:
    write_archive(tmp_path / "source", 200, 150)
    db = str(tmp_path / "s.db")
    async with open_store(db) as store:
        await import_archive(store, tmp_path / "source")
    expected = tree(tmp_path / "source")
    interrupted = 0
    for delay in (0.05, 0.15, 0.3, 0.5, 0.8):
        out = tmp_path / f"killed-{delay}"
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", EXPORTER, db, str(out), stdout=asyncio.subprocess.PIPE
        )
        assert worker.stdout is not None
        await worker.stdout.readline()
        await asyncio.sleep(delay)
        if worker.returncode is None:
            worker.send_signal(signal.SIGKILL)
        await worker.wait()
        written = tree(out) if out.exists() else {}
        finals = {
            name: data for name, data in written.items() if not name.split("/")[-1].startswith(".")
        }
        for name, data in finals.items():
            assert data == expected[name], name  # whole, or not there
        interrupted += len(finals) < len(expected)
    assert interrupted >= 2  # the kills did land mid-export
