"""The import contract as tests: sessions written elsewhere, imported line for
line (`SessionStore.import_session`; part of `SessionStoreContract`)."""

from __future__ import annotations

import pytest

from sessionstore import (
    InvalidRecordError,
    MessageEntry,
    SessionConflictError,
    SessionMeta,
    SessionNotFoundError,
    StreamingMessageError,
    build_context,
    decode_entry,
    decode_meta,
    encode,
)
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.common import (
    IMPORTED_LINES,
    glance,
    imported_header,
    message,
    raw,
    stream,
)

BAD_LINES = {
    "not-json": "not json",
    "empty": "",
    "a-header": '{"id":"x","version":1,"created_at":""}',
    "wrong-type": '{"type":"message","id":1,"timestamp":"t","message":{"role":"u","content":""}}',
    "two-lines": encode(message("e1", "x")) + "\n" + encode(message("e2", "x")),
    # Lines pydantic's parser reads, taking the last of a repeated key or -0
    # as 0, which the strict decoder refuses, as serde does.
    "repeated-key": '{"type":"message","id":"a","id":"b","timestamp":"t",'
    '"message":{"role":"user","content":"x"}}',
    "repeated-message-key": '{"type":"message","id":"a","timestamp":"t",'
    '"message":{"role":"user","content":"x","content":"y"}}',
    "negative-zero": '{"type":"compaction","id":"c","timestamp":"t","summary":"s",'
    '"first_kept_id":"a","tokens_before":-0}',
}
"""Entry lines an import refuses, by what is wrong with them."""

BAD_HEADERS = {
    "not-json": "not json",
    "no-id": '{"version":1,"created_at":""}',
    "newline-ended": '{"id":"s","version":1,"created_at":""}\n',
    "two-lines": '{"id":"s"}\n{"id":"t"}',
}
"""Header lines an import refuses, by what is wrong with them."""

OTHER_HEADERS = [
    '{"id":"held","version":1,"created_at":"another"}',
    '{"id": "held", "version": 1, "created_at": ""}',
    '{"version":1,"id":"held","created_at":""}',
    '{"id":"held","version":1,"created_at":""}\r',
]
"""Header lines of the session ``held`` other than the one it is stored under
(another header, spaced, keys in another order, a carriage return)."""


@pytest.mark.asyncio
class ImportContract:
    """Imports keep each line as written, and refuse all of a batch or none."""

    async def test_an_imported_session_keeps_its_lines_and_reads_as_they_decode(
        self, store: SessionStore
    ) -> None:
        header = imported_header("imported")
        assert await store.import_session(header, stream(IMPORTED_LINES)) == 5
        assert await store.list() == [decode_meta(header)]
        assert await raw(store, "imported") == [header, *IMPORTED_LINES]  # byte for byte
        decoded = [decode_entry(line) for line in IMPORTED_LINES]
        assert await store.load("imported") == decoded
        assert [entry async for entry in store.iter_entries("imported")] == decoded
        context = build_context(decoded)
        assert [m.text() for m in context][1:] == [
            "first k",
            "\u00e9A \u00e9 \U0001f600",
            "second k",
            "par",
        ]
        assert await store.load_context("imported") == context
        if Capability.SUMMARIES in store.capabilities:
            glances = [glance(summary) for summary in await store.summaries()]
            assert glances == [(decode_meta(header), 5, "t5", True, None)]
        await store.append("imported", message("e6", "appended"))
        given = [block async for block in store.raw_blocks("imported")]
        assert all(block.endswith(b"\n") for block in given)
        expected = "".join(f"{line}\n" for line in await raw(store, "imported"))
        assert b"".join(given) == expected.encode()

    async def test_import_of_a_header_alone_creates_an_empty_session(
        self, store: SessionStore
    ) -> None:
        assert await store.import_session(imported_header("bare"), stream([])) == 0
        assert await store.load("bare") == []
        assert await raw(store, "bare") == [imported_header("bare")]

    async def test_import_after_the_current_count_appends_and_returns_how_many(
        self, store: SessionStore
    ) -> None:
        header = imported_header("grown")
        await store.import_session(header, stream(IMPORTED_LINES[:2]))
        assert await store.import_session(header, stream(IMPORTED_LINES[2:]), after=2) == 3
        assert await raw(store, "grown") == [header, *IMPORTED_LINES]
        meta = SessionMeta.new()  # the entries appended through the API count too
        await store.create(meta)
        await store.append(meta.id, message("e1", "api"))
        assert await store.import_session(encode(meta), stream(IMPORTED_LINES), after=1) == 5
        api = encode(message("e1", "api"))
        assert await raw(store, meta.id) == [encode(meta), api, *IMPORTED_LINES]

    async def test_import_after_a_wrong_count_or_under_another_header_line_is_refused(
        self, store: SessionStore
    ) -> None:
        meta = SessionMeta(id="held")  # stored as {"id":"held","version":1,"created_at":""}
        await store.create(meta)
        await store.import_session(encode(meta), stream(IMPORTED_LINES[:1]), after=0)
        wrong = [(encode(meta), 0), (encode(meta), 2), *((other, 1) for other in OTHER_HEADERS)]
        for header, after in wrong:
            with pytest.raises(SessionConflictError) as caught:
                await store.import_session(header, stream(IMPORTED_LINES[1:]), after=after)
            assert caught.value.session_id == "held"
        assert await raw(store, "held") == [encode(meta), IMPORTED_LINES[0]]

    async def test_an_import_of_what_does_not_decode_is_refused_and_stores_nothing(
        self, store: SessionStore
    ) -> None:
        header = imported_header("held")
        await store.import_session(header, stream(IMPORTED_LINES[:1]))
        for bad in BAD_LINES.values():
            with pytest.raises(InvalidRecordError, match="named-session"):
                await store.import_session(
                    imported_header("named-session"), stream([*IMPORTED_LINES, bad])
                )
            with pytest.raises(InvalidRecordError):
                await store.import_session(header, stream([*IMPORTED_LINES[1:], bad]), after=1)
        for bad in BAD_HEADERS.values():
            with pytest.raises(InvalidRecordError):
                await store.import_session(bad, stream(IMPORTED_LINES))
        assert [meta.id for meta in await store.list()] == ["held"]  # nothing created
        with pytest.raises(SessionNotFoundError):
            await store.load("named-session")
        assert await raw(store, "held") == [header, IMPORTED_LINES[0]]  # nothing appended

    @pytest.mark.parametrize("after", [None, 1], ids=["new", "after"])
    async def test_import_refused_past_a_megabyte_of_lines_stores_none_of_them(
        self, store: SessionStore, after: int | None
    ) -> None:
        # The bad line comes after more than one write of every backend (a
        # megabyte of lines, 2000 rows): what was written by then is undone.
        header = imported_header("large")
        if after is not None:
            await store.import_session(header, stream(IMPORTED_LINES[:1]))
        many = [encode(message(f"e{n}", "x" * 420)) for n in range(2100)]
        with pytest.raises(InvalidRecordError):
            await store.import_session(header, stream([*many, "not json"]), after=after)
        if after is None:
            assert await store.list() == []
        else:
            assert await raw(store, "large") == [header, IMPORTED_LINES[0]]

    async def test_import_keeps_a_streaming_message_the_api_refuses(
        self, store: SessionStore
    ) -> None:
        await store.import_session(imported_header("history"), stream(IMPORTED_LINES[4:]))
        [entry] = await store.load("history")
        assert isinstance(entry, MessageEntry)
        assert entry.message.streaming
        with pytest.raises(StreamingMessageError):
            await store.append("history", entry)
        assert await raw(store, "history") == [imported_header("history"), IMPORTED_LINES[4]]
