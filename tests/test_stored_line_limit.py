"""A stored line longer than the wire reads (`sessionstore.wire.MAX_LINE`,
64 MiB; lowered here) is a `CorruptSessionError` naming the session, the
file and the line, refused before any parser is given it; and pydantic-core
panicking (``pyo3_runtime.PanicException``, a `BaseException`, as when it
cannot allocate for a huge line) is one too, never the panic itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    CorruptSessionError,
    InvalidRecordError,
    JsonlStore,
    SessionMeta,
    decode_entry,
    decode_meta,
)
from sessionstore.backends.records import decode_stored_entries, decode_stored_entry
from sessionstore.testing.contract import message
from sessionstore.wire import MAX_LINE, limits, stored

LIMIT = 64 * 1024


@pytest.fixture(autouse=True)
def lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_LINE", LIMIT)


def long_entry(size: int, *, closed: bool) -> bytes:
    head = b'{"type":"message","id":"e2","timestamp":"t","message":{"role":"user","content":"'
    return head + b"x" * size + (b'"}}' if closed else b"")


def entry_line() -> bytes:
    return message("e1", "hi").model_dump_json().encode()


def test_the_limit_is_64_mib() -> None:
    assert MAX_LINE == 64 * 2**20


@pytest.mark.parametrize("closed", [True, False])
def test_every_decoder_refuses_a_line_past_the_limit_before_parsing(closed: bool) -> None:
    line = long_entry(LIMIT, closed=closed)
    for data in (line, line.decode()):
        with pytest.raises(InvalidRecordError, match=f"longer than the limit of {LIMIT}"):
            decode_entry(data)
        with pytest.raises(InvalidRecordError, match=f"longer than the limit of {LIMIT}"):
            stored.read_stored_entry(data)
        with pytest.raises(CorruptSessionError, match=r"'s1', f\.jsonl line 7: a session entry"):
            decode_stored_entry("s1", data, path="f.jsonl", line_no=7)
        with pytest.raises(CorruptSessionError, match="line 3: a session entry of"):
            decode_stored_entries("s1", [(1, entry_line()), (2, data)], path="f")
    header = b'{"id":"s1","x":"' + b"y" * LIMIT + b'"}'
    with pytest.raises(InvalidRecordError, match="a session header of"):
        decode_meta(header)
    with pytest.raises(InvalidRecordError, match="a session header of"):
        stored.read_stored_meta(header)
    assert decode_entry(long_entry(LIMIT - 200, closed=True)).id == "e2"  # under it: read


class PanicException(BaseException):  # pyo3_runtime's name, and its base
    """Stands for pyo3's panic, which pydantic-core raises when it cannot allocate."""


def test_a_panic_of_the_parser_is_a_corrupt_session_naming_the_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def panics(line: Any) -> Any:
        raise PanicException("capacity overflow")

    monkeypatch.setattr(stored, "_validate_entry", panics)
    monkeypatch.setattr(stored, "_validate_meta", panics)
    line = entry_line()
    with pytest.raises(
        CorruptSessionError, match=r"f\.jsonl line 2: .*panicked: capacity overflow"
    ):
        decode_stored_entry("s1", line, path="f.jsonl", line_no=2)
    with pytest.raises(InvalidRecordError, match="session header could not be parsed"):
        stored.read_stored_meta(b'{"id":"s1"}')

    def interrupted(line: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(stored, "_validate_entry", interrupted)
    with pytest.raises(KeyboardInterrupt):  # anything else is left as it is
        decode_stored_entry("s1", line, path="f.jsonl", line_no=2)


@pytest.mark.asyncio
async def test_a_store_with_a_long_malformed_line_names_it_and_raises_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with JsonlStore(tmp_path) as store:
        await store.create(SessionMeta(id="s1"))
        await store.append("s1", message("e1", "hi"))
    path = tmp_path / "s1.jsonl"
    with path.open("ab") as file:  # a raw writer's line of 2 MB (past a block read), never closed
        file.write(long_entry(2 * 2**20, closed=False) + b"\n")
    where = rf"session 's1', {path} line 3: a session entry of (more than )?\d+ bytes, longer than"
    async with JsonlStore(tmp_path) as store:
        with pytest.raises(CorruptSessionError, match=where):
            await store.load("s1")
        with pytest.raises(CorruptSessionError, match=where):
            await store.load_context("s1")
        with pytest.raises(CorruptSessionError, match="line 3: a line of more than"):
            await store.load_slice("s1", -1)  # read in blocks: the line is never joined whole
        with pytest.raises(CorruptSessionError, match="line 3: a line of more than"):
            [entry async for entry in store.iter_entries("s1")]
        with pytest.raises(CorruptSessionError, match="line 3: a line of more than"):
            [line async for line in store.raw_lines("s1")]
        await store.summaries()  # a count of lines: answered, or a clean error

        def panics(line: Any) -> Any:
            raise PanicException("capacity overflow")

        monkeypatch.setattr(limits, "MAX_LINE", MAX_LINE)
        monkeypatch.setattr(stored, "_validate_entry", panics)
        with pytest.raises(CorruptSessionError, match=f"{path} line 2: .*panicked"):
            await store.load("s1")


@pytest.mark.asyncio
async def test_a_header_longer_than_the_limit_is_named_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(b'{"id":"s1","x":"' + b"y" * (4 * LIMIT) + b'"}\n')
    async with JsonlStore(tmp_path) as store:
        header = r"s1\.jsonl line 1: a session header of \d+ bytes"
        with pytest.raises(CorruptSessionError, match=header):
            await store.load("s1")
        assert await store.list() == []  # not listed: a fault, which verify names
        faults = await store.integrity()
        assert any("s1.jsonl line 1: a session header longer than the limit" in f for f in faults)
