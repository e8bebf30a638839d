"""Journal.parse: never fails, skips what it cannot read (SPEC section 5)."""

import uuid

import pytest

from sessionstore import Journal, JournalSession, encode_line
from sessionstore.testing.journal_contract import comment, header, post


def test_lines_read_back_grouped_by_session() -> None:
    p, c = post(33), comment(34, uuid.uuid4())
    journal = Journal.parse(encode_line(header(32)) + encode_line(p) + encode_line(c))
    assert journal == Journal(sessions=[JournalSession(header=header(32), writes=[p, c])])
    assert len(list(journal.interrupted())) == 1
    assert journal.writes() == 2


def test_empty_data_is_an_empty_journal() -> None:
    assert Journal.parse(b"") == Journal()
    assert list(Journal().interrupted()) == []
    assert Journal().writes() == 0


def test_a_torn_line_is_skipped_and_never_eats_the_next() -> None:
    p, q = post(1), post(2)
    data = (
        encode_line(header(0))
        + encode_line(p)
        + b'{"line":"post","at":"2026-10'
        + b"\n"
        + encode_line(q)
    )
    journal = Journal.parse(data)
    assert journal.skipped == [3]
    assert journal.sessions[0].writes == [p, q]


def test_garbage_and_unknown_lines_are_skipped_and_writes_kept_without_header() -> None:
    p = post(5)
    data = (
        b"\xff\xfe not json\n"
        + b'{"line":"vote","at":"2026-10-13T11:00:00Z"}'
        + b"\n\n"
        + encode_line(p)
    )
    journal = Journal.parse(data)
    assert journal.skipped == [1, 2]
    assert journal.sessions == [JournalSession(header=None, writes=[p])]


def test_sessions_without_writes_are_not_interrupted() -> None:
    p = post(21)
    data = encode_line(header(0)) + encode_line(header(20)) + encode_line(p)
    journal = Journal.parse(data)
    assert len(journal.sessions) == 2
    assert [s.header for s in journal.interrupted()] == [header(20)]


def test_writes_before_any_header_form_a_headerless_session_then_headers_follow() -> None:
    p, q = post(1), post(2)
    journal = Journal.parse(encode_line(p) + encode_line(header(5)) + encode_line(q))
    assert journal.sessions == [
        JournalSession(header=None, writes=[p]),
        JournalSession(header=header(5), writes=[q]),
    ]


@pytest.mark.parametrize("blank", [b"", b" ", b"\t", b"\r", b"\x0c", b" \t\r\x0c "])
def test_blank_pieces_are_ignored(blank: bytes) -> None:
    p = post(1)
    journal = Journal.parse(blank + b"\n" + encode_line(p) + blank + b"\n" + blank)
    assert journal.skipped == []
    assert journal.writes() == 1


def test_vertical_tab_is_not_blank() -> None:
    p = post(1)
    journal = Journal.parse(b"\x0b\n" + encode_line(p) + b" \x0b \n")
    assert journal.skipped == [1, 3]
    assert journal.writes() == 1


def test_crlf_lines_parse() -> None:
    p = post(1)
    journal = Journal.parse(encode_line(header(0)).replace(b"\n", b"\r\n") + encode_line(p))
    assert journal.skipped == []
    assert journal.sessions[0].header == header(0)


def test_hostile_lines_are_skipped_not_fatal() -> None:
    hostile = [
        b"[" * 10_000,
        b'{"line":"post","at":"2026-10-13T11:00:00Z","id":"x"}',
        b'{"line":"post","at":"2026-10-13T11:00:00","id":"3425d7c5-0000-4000-8000-000000000000"}',
        b'{"line":"session","started_at":"2026-10-13T11:00:00Z","model":"m"} trailing',
        b"\xef\xbb\xbf" + encode_line(header(0)).rstrip(b"\n"),
        b'{"line":"post","line":"post"}',
        b"null",
        b'"\\ud800"',
    ]
    journal = Journal.parse(b"\n".join(hostile))
    assert journal.skipped == list(range(1, len(hostile) + 1))
    assert journal.sessions == []


def test_parse_accepts_bytes_like_input() -> None:
    data = encode_line(header(0))
    assert Journal.parse(bytearray(data)) == Journal.parse(data)
