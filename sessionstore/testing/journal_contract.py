"""The journal contract as tests: `SessionJournalContract` (see the package docs)."""

from __future__ import annotations

import uuid

import pytest

from sessionstore.errors import ConfigurationError, InvalidRecordError
from sessionstore.journal import Journal, JournalSession
from sessionstore.models import CommentWrite, PostWrite, SessionHeader
from sessionstore.testing.common import JournalBackend, digest
from sessionstore.testing.effects_contract import EffectsContract
from sessionstore.testing.effects_operations_contract import EffectOperationsContract
from sessionstore.testing.keyed_contract import KeyedContract
from sessionstore.timestamps import Timestamp
from sessionstore.wire import encode


def at(minute: int) -> Timestamp:
    """A fixed instant, for readable assertions."""
    return Timestamp.parse(f"2026-10-13T11:{minute:02d}:00Z")


def header(minute: int) -> SessionHeader:
    """A session header that started at a fixed minute."""
    return SessionHeader(started_at=at(minute), model="claude-test")


def post(minute: int) -> PostWrite:
    """A post write with a fresh id."""
    return PostWrite(at=at(minute), id=uuid.uuid4())


def comment(minute: int, on: uuid.UUID | None = None) -> CommentWrite:
    """A comment write with a fresh id."""
    return CommentWrite(at=at(minute), id=uuid.uuid4(), on=on)


@pytest.mark.asyncio
class SessionJournalContract(EffectsContract, EffectOperationsContract, KeyedContract):
    """Every rule of the journal contract, its effects' and keyed lines'
    included, over the ``journal_backend`` fixture."""

    async def test_appended_lines_read_back_by_session(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        p, c = post(33), comment(34, uuid.uuid4())
        await journal.begin(header(32), Journal())
        await journal.append(p)
        await journal.append(c)
        read = await journal.read()
        assert read == Journal(sessions=[JournalSession(header=header(32), writes=[p, c])])
        assert len(list(read.interrupted())) == 1

    async def test_no_journal_reads_empty_and_a_leftover_without_writes_is_discarded(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        assert await journal.read() == Journal()
        await journal.clear()
        await journal.clear()  # clearing nothing is fine
        assert await journal.read() == Journal()
        await journal.begin(header(0), Journal())
        leftover = await journal.read()
        assert list(leftover.interrupted()) == []
        await journal.begin(header(10), leftover)
        read = await journal.read()
        assert [s.header for s in read.sessions] == [header(10)]

    async def test_a_leftover_with_writes_is_kept_and_the_next_session_follows(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        first, second = post(1), comment(21)
        await journal.begin(header(0), Journal())
        await journal.append(first)
        leftover = await journal.read()
        await journal.begin(header(20), leftover)
        await journal.append(second)

        sessions = list((await journal.read()).interrupted())
        assert [s.writes for s in sessions] == [[first], [second]]
        assert sessions[1].header == header(20)

        await journal.clear()
        assert await journal.read() == Journal()

    async def test_a_torn_line_is_skipped_and_never_eats_the_next(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        p, q = post(1), post(2)
        await journal.begin(header(0), Journal())
        await journal.append(p)
        await journal.append_raw(b'{"line":"post","at":"2026-10')
        await journal.append(q)
        read = await journal.read()
        assert read.skipped == [3]
        assert read.sessions[0].writes == [p, q]

    async def test_garbage_and_unknown_lines_are_skipped_not_fatal(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        p = post(5)
        await journal.append_raw(b"\xff\xfe not json")
        await journal.append_raw(b'{"line":"vote","at":"2026-10-13T11:00:00Z"}')
        await journal.append_raw(b"")
        await journal.append(p)
        read = await journal.read()
        assert read.skipped == [1, 2]
        assert read.sessions == [JournalSession(header=None, writes=[p])]

    async def test_a_torn_header_leaves_its_writes_in_a_headerless_session(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        p, q = post(1), post(2)
        await journal.append_raw(b'{"line":"session","started_at":"2026-10-13T1')
        await journal.append(p)
        await journal.append(q)
        read = await journal.read()
        assert read.skipped == [1]
        assert read.sessions == [JournalSession(header=None, writes=[p, q])]
        assert len(list(read.interrupted())) == 1

    async def test_blank_lines_are_ignored_but_vertical_tab_is_not_blank(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        for blank in (b" ", b"\t\r", b"\x0c"):
            await journal.append_raw(blank)
        await journal.append_raw(b"\x0b")
        await journal.append(post(1))
        read = await journal.read()
        assert read.skipped == [4]
        assert read.writes() == 1

    async def test_lines_are_written_in_canonical_form(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        write = PostWrite(at=at(3), id=uuid.UUID("3425d7c5-0000-4000-8000-000000000000"))
        await journal.append(write)
        await journal.append_raw(encode(write).encode())
        read = await journal.read()
        assert read.skipped == []
        assert read.sessions[0].writes == [write, write]

    async def test_raw_lines_go_in_together_and_read_back_verbatim(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        await journal.append_raw(b"one", b"", b"three\r")
        assert await journal.read_bytes() == b"one\n\nthree\r\n"
        with pytest.raises(InvalidRecordError):
            await journal.append_raw(b"fine", b"not\nfine")
        assert await journal.read_bytes() == b"one\n\nthree\r\n"
        assert (await journal.read()).skipped == [1, 3]

    async def test_a_new_journal_object_reads_the_same(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        await journal.begin(header(0), Journal())
        await journal.append(post(1))
        await journal.append_raw(b"torn")
        again = await journal_backend.open()
        assert await again.read() == await journal.read()

    async def test_wrong_records_are_refused_and_nothing_written(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        with pytest.raises(InvalidRecordError):
            await journal.append("not a record")  # type: ignore[arg-type]
        with pytest.raises(InvalidRecordError):
            await journal.begin(post(1), Journal())  # type: ignore[arg-type]
        with pytest.raises(InvalidRecordError, match="newline"):
            await journal.append_raw(b'{"line":"post"}\n{"line":"post"}')
        assert await journal.read() == Journal()

    async def test_erase_removes_the_journal_for_every_object_and_returns_its_record(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        assert await journal.erase(reason="nothing there") is None
        await journal.append_raw(b"one", b"two")
        await journal.append_raw(b"three")
        with pytest.raises(ConfigurationError):
            await journal.erase(reason="")
        record = await journal.erase(reason="the user asked")
        assert record is not None
        assert (record.kind, record.lines, record.reason) == ("journal", 3, "the user asked")
        assert record.digest == digest(b"one\ntwo\nthree\n")
        assert await (await journal_backend.open()).read_bytes() == b""
        await journal.begin(header(40), Journal())  # a journal may start again
        assert len((await journal.read()).sessions) == 1
