"""Exported session files, forks included, loaded by the Rust store's own rules.

SPEC section 7: a fork's exported file is self-contained, its whole history
as `load` gives it, readable by the Rust store. The oracle loads each file
as the seed's ``JsonlSessionStore::load`` does (the header on line 1, every
further line an entry, a torn tail dropped, any other bad line refusing the
file) and answers what it decoded: serde_json's re-encoding of each line,
which must be ours, except for the files `FILE_DEVIATIONS` names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore import (
    ArchiveError,
    CorruptSessionError,
    JsonlStore,
    MemoryStore,
    SessionMeta,
    SessionStore,
    decode_meta,
    encode,
    encode_line,
    open_store,
)
from sessionstore.archive import ArchiveReport, export_archive, import_archive
from sessionstore.testing.common import message
from tests.differential.oracle import Oracle, oracle_or_skip
from tests.forks import FORKS, SESSIONS, fill_forks
from tests.kinds import STORE_KINDS, StoreTargets


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle(oracle_or_skip())


async def ours(store: SessionStore, session_id: str) -> list[str]:
    """The session as we read it, each record re-encoded: the header first."""
    (meta,) = [meta for meta in await store.list() if meta.id == session_id]
    return [encode(meta), *(encode(entry) for entry in await store.load(session_id))]


@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_the_rust_store_loads_every_exported_fork_as_we_read_it(
    oracle: Oracle, kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    async with open_store(store_targets.new(kind)) as store:
        await fill_forks(store)
        await export_archive(store, tmp_path)
        files = [tmp_path / "sessions" / f"{session_id}.jsonl" for session_id in SESSIONS]
        for session_id, loaded in zip(SESSIONS, oracle.load_sessions(files), strict=True):
            assert isinstance(loaded, list), f"the Rust store refuses {session_id}: {loaded}"
            assert loaded == await ours(store, session_id), session_id
            assert decode_meta(loaded[0]).parent_session == FORKS.get(session_id)


HEADER = b'{"id":"%s","version":1,"created_at":""}'
LINE = encode_line(message("e1", "x"))

HAND_FILES = {
    "crlf": HEADER.replace(b"%s", b"crlf") + b"\r\n" + LINE[:-1] + b"\r\n",
    "torn-tail": HEADER.replace(b"%s", b"torn-tail") + b"\n" + LINE + b'{"type":"mess',
    "empty": b"",
    "blank-line": HEADER.replace(b"%s", b"blank-line") + b"\n\n" + LINE,
    "bad-entry": HEADER.replace(b"%s", b"bad-entry") + b"\n" + LINE + b"not json\n",
    "bad-header": b'{"version":1}\n' + LINE,
}
"""Files the seed's tests and SPEC section 3 name, by what the Rust store does
with them: ``crlf`` and ``torn-tail`` load (a torn tail is dropped), the
others are refused."""


async def test_the_rust_store_refuses_what_our_import_refuses_and_reads_the_rest_alike(
    oracle: Oracle, tmp_path: Path
) -> None:
    directory = tmp_path / "sessions"
    directory.mkdir()
    for name, data in HAND_FILES.items():
        (directory / f"{name}.jsonl").write_bytes(data)
    answers = oracle.load_sessions([directory / f"{name}.jsonl" for name in HAND_FILES])
    theirs = dict(zip(HAND_FILES, answers, strict=True))
    assert sorted(name for name, loaded in theirs.items() if isinstance(loaded, list)) == [
        "crlf",
        "torn-tail",
    ]
    store = MemoryStore()
    with pytest.raises(ArchiveError) as caught:
        await import_archive(store, tmp_path)
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    refused = sorted(Path(issue.file).stem for issue in report.refused)
    assert refused == sorted(name for name, loaded in theirs.items() if isinstance(loaded, str))
    for name in ("crlf", "torn-tail"):
        assert theirs[name] == await ours(store, name)


@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_a_header_with_our_fields_and_titles_beside_loads_in_the_rust_store(
    oracle: Oracle, kind: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    # The reference reads only sessions/: titles/ beside it, and the header's
    # title, owner, tags and metadata (unknown fields to serde), change nothing.
    meta = SessionMeta(
        id="titled",
        created_at="2026-01-01T00:00:00+00:00",
        parent_session="elsewhere",
        title="Trip to Lisbon",
        owner="ann",
        tags=("trip", "train"),
        metadata={"nested": {"list": [1, 2.5, None, "é"]}, "flag": True},
    )
    async with open_store(store_targets.new(kind)) as store:
        await store.create(meta)
        await store.append_many(meta.id, [message("e1", "a"), message("e2", "b")])
        await store.set_title(meta.id, "Lisbon, by train")
        await export_archive(store, tmp_path)
        [loaded] = oracle.load_sessions([tmp_path / "sessions" / "titled.jsonl"])
        assert isinstance(loaded, list), f"the Rust store refuses it: {loaded}"
        header, *entries = await ours(store, meta.id)
    assert (tmp_path / "titles" / "titled.jsonl").is_file()
    assert entries == loaded[1:]
    # serde writes the reference's four fields; ours are those, then ours.
    reference = meta.model_copy(update={"title": None, "owner": None, "tags": (), "metadata": {}})
    assert decode_meta(loaded[0]) == reference
    assert header.startswith(loaded[0][:-1] + ',"title":')


FILE_DEVIATIONS = {
    "torn-inside-a-character": HEADER.replace(b"%s", b"torn-inside-a-character")
    + b"\n"
    + LINE
    + '{"type":"message","id":"\u00e9'.encode()[:-1],
    "named-elsewhere": HEADER.replace(b"%s", b"other") + b"\n" + LINE,
}
"""Session files a directory store reads otherwise than the Rust store
(docs/wire-format.md lists them): a torn tail cut inside a UTF-8 character
(the Rust store reads the whole file as UTF-8 first and fails; we drop the
tail as any torn tail), and a file whose header names another session than
its file name (the Rust store loads it; we refuse it, as its id would not
be the one the file is found by)."""


async def test_the_rust_store_reads_session_files_otherwise_only_as_listed(
    oracle: Oracle, tmp_path: Path
) -> None:
    for name, data in FILE_DEVIATIONS.items():
        (tmp_path / f"{name}.jsonl").write_bytes(data)
    torn, named = oracle.load_sessions([tmp_path / f"{name}.jsonl" for name in FILE_DEVIATIONS])
    store = JsonlStore(tmp_path)

    assert isinstance(torn, str), "the Rust store now reads a cut character: drop the deviation"
    assert "UTF-8" in torn
    assert await store.load("torn-inside-a-character") == [message("e1", "x")]

    assert isinstance(named, list), f"the Rust store now refuses the file: {named}"
    assert decode_meta(named[0]).id == "other"
    with pytest.raises(CorruptSessionError, match="header names session 'other'"):
        await store.load("named-elsewhere")
    assert [meta.id for meta in await store.list()] == ["torn-inside-a-character"]
