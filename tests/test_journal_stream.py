"""Journal.parse streaming: any chunking of the same bytes reads the same,
and no line is held longer than MAX_LINE."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import Journal, encode_line
from sessionstore import journal as journal_module
from sessionstore.journal import MAX_LINE
from sessionstore.testing.journal_contract import comment, header, post

PIECES = [
    encode_line(header(0)),
    encode_line(post(1)),
    encode_line(comment(2)),
    encode_line(header(3)).replace(b"\n", b"\r\n"),
    b'{"line":"post","at":"2026-10',  # torn
    b"not json",
    b"\n",
    b" \t\x0c\r",
    b"\x0b",
    b"\xff\xfe",
]


def chunked(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    start = 0
    for cut in sorted(cuts):
        yield data[start:cut]
        start = cut
    yield data[start:]


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=20),
)
def test_any_chunking_reads_as_the_whole(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    whole = Journal.parse(data)
    assert Journal.parse(chunked(data, cuts)) == whole
    assert Journal.parse(io.BytesIO(data)) == whole
    assert Journal.parse(memoryview(data)) == whole
    assert Journal.parse(bytearray(data)) == whole
    assert Journal.parse(iter(io.BytesIO(data))) == whole  # a file's lines


@settings(max_examples=100, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=12),
)
def test_a_small_read_size_changes_nothing(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    whole = Journal.parse(data)
    original = journal_module.READ
    journal_module.READ = 3
    try:
        assert Journal.parse(io.BytesIO(data)) == whole
    finally:
        journal_module.READ = original


@pytest.mark.parametrize("size", [1, 7, 1 << 16, 1 << 22])
def test_a_line_longer_than_max_line_is_skipped_however_it_comes(size: int) -> None:
    long = b'{"line":"session","started_at":"2026-10-13T11:00:00Z","model":"'
    long += b"m" * MAX_LINE + b'"}'
    data = encode_line(header(0)) + long + b"\n" + encode_line(post(1))
    read = Journal.parse(chunked(data, list(range(size, len(data), size))))
    assert read.skipped == [2]
    assert read.writes() == 1


@pytest.mark.parametrize("size", [1 << 10, 1 << 22])
def test_a_line_of_max_line_bytes_is_still_read(size: int) -> None:
    prefix = b'{"line":"session","started_at":"2026-10-13T11:00:00Z","model":"'
    line = prefix + b"m" * (MAX_LINE - len(prefix) - 2) + b'"}'
    assert len(line) == MAX_LINE
    data = line + b"\n" + encode_line(post(1))
    read = Journal.parse(chunked(data, list(range(size, len(data), size))))
    assert read.skipped == []
    assert read.sessions[0].header is not None
    assert read.writes() == 1


@pytest.mark.parametrize("size", [1 << 10, 1 << 22])
def test_a_blank_piece_longer_than_max_line_is_still_blank(size: int) -> None:
    data = encode_line(header(0)) + b" \r\t" * MAX_LINE + b"\n" + encode_line(post(1))
    read = Journal.parse(chunked(data, list(range(size, len(data), size))))
    assert read.skipped == []
    assert read.writes() == 1


def test_a_long_piece_that_is_blank_only_at_first_is_skipped() -> None:
    data = b" " * MAX_LINE + b"x" + b"\n" + encode_line(post(1))
    assert Journal.parse(data).skipped == [1]
    data = b" " * (MAX_LINE // 2) + b"x" + b" " * MAX_LINE + b"\n"
    assert Journal.parse(chunked(data, [10, MAX_LINE // 2 + 5])).skipped == [1]


def test_numbers_count_every_piece_across_chunks() -> None:
    data = b"\n\nbad\n" + encode_line(post(1)) + b"bad"
    assert Journal.parse(chunked(data, [1, 2, 4, 9])).skipped == [3, 5]


def test_chunks_of_any_bytes_like_type_are_read() -> None:
    data = encode_line(header(0)) + b"bad\n" + encode_line(post(1))
    cuts = [5, 40, len(data) - 3]
    whole = Journal.parse(data)
    assert Journal.parse(memoryview(c) for c in chunked(data, cuts)) == whole
    assert Journal.parse(bytearray(c) for c in chunked(data, cuts)) == whole


def test_a_vertical_tab_is_not_blank_in_a_long_piece_either() -> None:
    # \x0b is ASCII whitespace to bytes.strip(), but no blank to a journal.
    tabs = b"\x0b" * (MAX_LINE + 1)
    assert Journal.parse(tabs + b"\n").skipped == [1]
    # ... whether it came before the piece grew too long, or after.
    assert Journal.parse([b"\x0b" * 10, b" " * MAX_LINE + b"\n"]).skipped == [1]
    assert Journal.parse([b" " * 10, b" " * MAX_LINE + b"\n"]).skipped == []


def test_a_long_last_piece_without_a_newline_is_judged_the_same() -> None:
    assert Journal.parse(b"\n" + b" " * (MAX_LINE + 1)).skipped == []
    assert Journal.parse(b"\n" + b"x" * (MAX_LINE + 1)).skipped == [2]
    assert Journal.parse([b"\n", b" " * MAX_LINE, b"  "]).skipped == []
