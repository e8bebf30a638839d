"""The browse-and-find contract as tests: header metadata, titles, paged
summaries and full-text search (part of `SessionStoreContract`)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import (
    ConfigurationError,
    InvalidCursorError,
    InvalidRecordError,
    Message,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    TitleChange,
    encode,
)
from sessionstore.backends.cursors import Cursor, listing_kind
from sessionstore.backends.words import INDEXED_CHARS
from sessionstore.store import Capability, Order, SearchHit, SessionStore, SessionSummary
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import compaction, examples, message, raw, stream


async def every_page(
    store: SessionStore,
    *,
    limit: int,
    owner: str | None = None,
    order: Order = "last_activity",
    after: str | None = None,
) -> list[SessionSummary]:
    """Every summary of a listing (after the cursor ``after``), page by page."""
    pages: list[SessionSummary] = []
    while True:
        page = await store.summaries(owner=owner, order=order, limit=limit, after=after)
        pages += page
        if len(page) < limit:
            return pages
        after = page[-1].cursor


async def every_hit(
    store: SessionStore, text: str, *, limit: int, owner: str | None = None
) -> list[SearchHit]:
    """Every hit of a search, page by page."""
    hits: list[SearchHit] = []
    after = None
    while True:
        page = await store.search(text, owner=owner, limit=limit, after=after)
        hits += page
        if len(page) < limit:
            return hits
        after = page[-1].cursor


def _words(text: str) -> list[str]:
    """The words of a text, in order, by the documented rule, written out plainly."""
    out, word = [], ""
    for char in text + " ":
        if char.isalnum():
            word += char
        elif word:
            out.append(word.lower())
            word = ""
    return out


async def expected_hits(
    store: SessionStore, query: str, sessions: Iterable[str]
) -> list[tuple[str, int]]:
    """``(session, seq)`` of every message holding every word of ``query``,
    found by loading each session, in the one order of every backend: best
    score first (the occurrences of the query's words, each counted 256
    times at most, squared, over the message's length in words), then
    session id, then seq."""
    wanted = set(_words(query))
    found = []
    for session_id in sessions:
        for seq, entry in enumerate(await store.load(session_id), 1):
            if not isinstance(entry, MessageEntry):
                continue
            said = _words(entry.message.text()[:INDEXED_CHARS])
            if wanted and wanted <= set(said):
                hits = sum(min(said.count(word), 256) for word in wanted)
                found.append((-(hits * hits / len(said)), session_id, seq))
    return [(session_id, seq) for _, session_id, seq in sorted(found)]


@pytest.mark.asyncio
class BrowseContract:
    """Sessions carry a title, an owner, tags and metadata; listings page
    exactly; search finds every message holding every word."""

    # ------------------------------------------------------- header fields

    @needs(Capability.SUMMARIES)
    async def test_header_fields_are_stored_and_read_back(self, store: SessionStore) -> None:
        meta = SessionMeta.new(
            title="Trip to Lyon",
            owner="user-7",
            tags=["travel", "fr"],
            metadata={"plan": "pro", "limits": [1, 2.5, None], "nested": {"x": True}},
        )
        await store.create(meta)
        assert await store.list() == [meta]
        assert (await raw(store, meta.id))[0] == encode(meta)
        [summary] = await store.summaries()
        assert (summary.meta, summary.title, summary.owner, summary.id) == (
            meta,
            "Trip to Lyon",
            "user-7",
            meta.id,
        )

    async def test_an_imported_header_keeps_ill_typed_fields_in_its_line_only(
        self, store: SessionStore
    ) -> None:
        header = '{"id":"old","created_at":"","title":7,"owner":"o","tags":"x","tags2":[]}'
        await store.import_session(header, stream([encode(message("m1", "hi"))]))
        [meta] = await store.list()
        assert (meta.title, meta.owner, meta.tags) == (None, "o", ())
        assert (await raw(store, "old"))[0] == header

    # ---------------------------------------------------------------- titles

    @needs(Capability.SUMMARIES, Capability.TITLES)
    async def test_titles_chosen_later_are_kept_beside_the_log(self, store: SessionStore) -> None:
        meta = SessionMeta.new(title="first")
        await store.create(meta)
        await store.append(meta.id, message("m1", "hi"))
        header = (await raw(store, meta.id))[0]
        renamed = await store.set_title(meta.id, "second")
        assert isinstance(renamed, TitleChange)
        assert renamed.title == "second"
        assert [s.title for s in await store.summaries()] == ["second"]
        cleared = await store.set_title(meta.id, None)
        assert [s.title for s in await store.summaries()] == ["first"]  # the header's again
        assert await store.titles(meta.id) == [renamed, cleared]
        assert await raw(store, meta.id) == [header, encode(message("m1", "hi"))]
        assert [e.id for e in await store.load(meta.id)] == ["m1"]

    @needs(Capability.TITLES)
    async def test_set_title_refusals_record_nothing(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFoundError):
            await store.set_title("nobody", "x")
        session = await store.create(SessionMeta.new())
        with pytest.raises(InvalidRecordError):
            await store.set_title(session, 5)  # type: ignore[arg-type]
        with pytest.raises(InvalidRecordError):
            await store.set_title(session, "lone \ud800")
        assert await store.titles(session) == []
        with pytest.raises(SessionNotFoundError):
            await store.titles("nobody")

    @needs(Capability.TITLES)
    async def test_import_titles_records_them_once(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="s"))
        changes = [
            TitleChange(session_id="s", title="a", at="2020-01-01T00:00:00Z"),
            TitleChange(session_id="s", at="2020-01-02T00:00:00Z"),
        ]
        assert await store.import_titles("s", changes) == 2
        assert await store.import_titles("s", changes) == 0  # run twice: kept once
        assert await store.titles("s") == changes
        more = [TitleChange(session_id="s", title="c", at="2020-01-03T00:00:00Z")]
        assert await store.import_titles("s", more, after=2) == 1
        assert await store.titles("s") == changes + more
        with pytest.raises(InvalidRecordError):
            await store.import_titles("s", [TitleChange(session_id="t", at="x")], after=3)
        with pytest.raises(SessionNotFoundError):
            await store.import_titles("nobody", [])

    @needs(Capability.ERASURE, Capability.SUMMARIES, Capability.TITLES)
    async def test_erase_takes_the_titles(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="s", owner="o"))
        await store.set_title("s", "secret title")
        await store.erase("s", reason="asked")
        with pytest.raises(SessionNotFoundError):
            await store.titles("s")
        await store.create(SessionMeta(id="s"))  # the id again: a new session
        assert await store.titles("s") == []
        assert [s.title for s in await store.summaries()] == [None]

    @needs(Capability.BRANCHES, Capability.SUMMARIES, Capability.TITLES)
    async def test_a_fork_keeps_its_sources_owner_and_title_as_a_change_of_its_own(
        self, store: SessionStore
    ) -> None:
        source = SessionMeta.new(owner="u", title="plan", tags=["t"], metadata={"k": 1})
        await store.create(source)
        await store.set_title(source.id, "plan, renamed")
        fork = await store.fork(source.id)
        assert (fork.owner, fork.tags, fork.metadata, fork.title) == ("u", ("t",), {"k": 1}, None)
        assert '"title"' not in (await raw(store, fork.id))[0]
        [change] = await store.titles(fork.id)  # its own, not in its header
        assert change.title == "plan, renamed"
        titles = {s.id: s.title for s in await store.summaries(owner="u")}
        assert titles == {source.id: "plan, renamed", fork.id: "plan, renamed"}
        untitled = await store.create(SessionMeta.new())
        bare = (await store.fork(untitled)).id
        assert await store.titles(bare) == []
        titles = {s.id: s.title for s in await store.summaries() if s.id in (untitled, bare)}
        assert titles == {untitled: None, bare: None}

    # ------------------------------------------------------------- listings

    @needs(Capability.SUMMARIES)
    async def test_created_order_is_newest_first_and_pages_cover_all(
        self, store: SessionStore
    ) -> None:
        metas = [
            SessionMeta(id=f"s{n:02}", created_at=f"2026-01-{n % 9 + 1:02}T00:00:00+00:00")
            for n in range(23)
        ]
        for meta in random.Random(4).sample(metas, len(metas)):
            await store.create(meta)
        expected = sorted(metas, key=lambda m: (m.created_at, m.id), reverse=True)
        for limit in (1, 5, 23, 50):
            listed = await every_page(store, order="created", limit=limit)
            assert [s.id for s in listed] == [m.id for m in expected]
        assert [s.id for s in await store.summaries(order="created", limit=None)] == [
            m.id for m in expected
        ]
        assert len(await store.summaries(order="created")) == 23  # 50 by default

    @needs(Capability.BRANCHES, Capability.SUMMARIES, Capability.TITLES)
    async def test_last_activity_puts_the_last_written_first(self, store: SessionStore) -> None:
        for name in ("a", "b", "c"):
            await store.create(SessionMeta(id=name))
        assert [s.id for s in await store.summaries()] == ["c", "b", "a"]
        await store.append("a", message("m1", "hi"))
        assert [s.id for s in await store.summaries()] == ["a", "c", "b"]
        await store.set_title("b", "a title is no activity")
        await store.append_many("c", [])  # nor is an empty batch
        assert [s.id for s in await store.summaries()] == ["a", "c", "b"]
        await store.fork("b", meta=SessionMeta(id="d"))
        listed = await store.summaries()
        assert [s.id for s in listed] == ["d", "a", "c", "b"]
        assert all(s.last_activity for s in listed)
        activity = {s.id: s.last_activity for s in listed}
        assert activity["a"] >= activity["c"] >= activity["b"]

    @needs(Capability.SUMMARIES)
    async def test_summaries_filter_by_owner(self, store: SessionStore) -> None:
        for n in range(12):
            await store.create(SessionMeta(id=f"s{n}", owner=["u1", "u2", None][n % 3]))
        for order in ("created", "last_activity"):
            mine = await every_page(store, owner="u1", order=order, limit=2)
            assert sorted(s.id for s in mine) == sorted(f"s{n}" for n in range(0, 12, 3))
            assert all(s.owner == "u1" for s in mine)
        assert await store.summaries(owner="nobody") == []

    @needs(Capability.BRANCHES, Capability.SUMMARIES)
    async def test_summaries_say_what_a_listing_shows(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="p", owner="o", title="T"))
        await store.append_many("p", [message("m1", "a"), message("m2", "b")])
        await store.append("p", compaction("c1", "sum", "m2"))
        await store.fork("p", at="m1", meta=SessionMeta(id="f", owner="o"))
        by_id = {s.id: s for s in await store.summaries(order="created")}
        p, f = by_id["p"], by_id["f"]
        assert (p.entries, p.compacted, p.title, p.meta.parent_session, p.fault) == (
            3,
            True,
            "T",
            None,
            None,
        )
        assert (f.entries, f.compacted, f.title, f.meta.parent_session) == (1, False, None, "p")
        assert p.last_timestamp == "2026-07-19T00:00:00+00:00"

    @needs(Capability.SUMMARIES)
    async def test_bad_listing_arguments_are_refused(self, store: SessionStore) -> None:
        for name in ("a", "b"):
            await store.create(SessionMeta(id=name, owner="o"))
        [first] = await store.summaries(limit=1)
        for bad in ("", "not a cursor", first.cursor[:-3], first.cursor + "x", "////"):
            with pytest.raises(InvalidCursorError):
                await store.summaries(limit=1, after=bad)
        with pytest.raises(InvalidCursorError):
            await store.summaries(limit=1, after=first.cursor, order="created")
        with pytest.raises(InvalidCursorError):
            await store.summaries(limit=1, after=first.cursor, owner="o")
        for limit in (0, -1, 1.5, True):
            with pytest.raises(ConfigurationError):
                await store.summaries(limit=limit)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await store.summaries(order="newest")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await store.summaries(owner=3)  # type: ignore[arg-type]
        assert [s.id for s in await store.summaries(limit=1, after=first.cursor)] == ["a"]

    @needs(Capability.ERASURE, Capability.SUMMARIES)
    async def test_erased_sessions_leave_listings_and_pages_go_on(
        self, store: SessionStore
    ) -> None:
        for n in range(6):
            await store.create(SessionMeta(id=f"s{n}"))
        page = await store.summaries(limit=2)
        assert [s.id for s in page] == ["s5", "s4"]
        await store.erase("s3", reason="r")
        await store.erase("s4", reason="r")
        rest = await every_page(store, limit=2)
        assert [s.id for s in rest] == ["s5", "s2", "s1", "s0"]
        after = await store.summaries(limit=2, after=page[-1].cursor)
        assert [s.id for s in after] == ["s2", "s1"]

    @needs(Capability.BRANCHES, Capability.SUMMARIES)
    async def test_paging_is_exact_while_sessions_are_written(self, store: SessionStore) -> None:
        """Writes between pages, chosen at random: each session that existed
        at the first page is listed once, in the order it had then."""
        runs = itertools.count()

        @examples(20)
        @given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 99)), max_size=30))
        def check(steps: list[tuple[int, int]]) -> None:
            asyncio.run(self._page_while_writing(store, f"x{next(runs)}", steps))

        await asyncio.to_thread(check)

    async def _page_while_writing(
        self, store: SessionStore, owner: str, steps: list[tuple[int, int]]
    ) -> None:
        names = [f"{owner}-{n}" for n in range(8)]
        for name in names:
            await store.create(SessionMeta(id=name, owner=owner, created_at=f"{name}"))
        await store.append(names[2], message("m0", "moves ahead"))
        for order in ("last_activity", "created"):
            before = [s.id for s in await store.summaries(owner=owner, order=order, limit=None)]
            made = itertools.count()
            page = await store.summaries(owner=owner, order=order, limit=3)
            seen = [s.id for s in page]
            for kind, n in steps:
                if len(page) < 3:
                    break
                if kind == 0:
                    page = await store.summaries(
                        owner=owner, order=order, limit=3, after=page[-1].cursor
                    )
                    seen += [s.id for s in page]
                elif kind == 1:
                    await store.append(before[n % len(before)], message(f"m{n}", "text"))
                else:
                    meta = SessionMeta(id=f"{owner}-{order}{next(made)}", owner=owner)
                    if kind == 2:
                        await store.create(meta)
                    else:
                        await store.fork(before[n % len(before)], meta=meta)
            if len(page) == 3:
                after = page[-1].cursor
                rest = await every_page(store, owner=owner, order=order, limit=3, after=after)
                seen += [s.id for s in rest]
            assert len(seen) == len(set(seen)), seen  # never twice
            old = [name for name in seen if name in before]
            if order == "last_activity":
                assert old == before  # each once, in the order of the first page
                assert seen == old  # nothing created since
            else:
                assert sorted(old) == sorted(before)

    @needs(Capability.SUMMARIES)
    async def test_paging_is_exact_under_concurrent_writers(self, store: SessionStore) -> None:
        names = [await store.create(SessionMeta(id=f"c{n:02}", owner="c")) for n in range(40)]
        before = [s.id for s in await store.summaries(owner="c", limit=None)]
        rng = random.Random(7)

        async def write(worker: int) -> None:
            for n in range(15):
                await store.append(rng.choice(names), message(f"w{worker}-{n}", "busy"))
                if n % 5 == 0:
                    await store.create(SessionMeta(id=f"new{worker}-{n}", owner="c"))

        # The listing stands where the first page found it: read it before
        # the writers start, so that `before` is what it must list.
        first = await store.summaries(owner="c", limit=4)

        async def page_through() -> list[str]:
            seen = [s.id for s in first]
            after = first[-1].cursor
            while True:
                page = await store.summaries(owner="c", limit=4, after=after)
                seen += [s.id for s in page]
                await asyncio.sleep(0)
                if len(page) < 4:
                    return seen
                after = page[-1].cursor

        seen, *_ = await asyncio.gather(page_through(), *(write(w) for w in range(4)))
        assert seen == before

    # ---------------------------------------------------------------- search

    async def test_search_finds_every_message_holding_every_word(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="a", owner="u"))
        await store.append_many(
            "a",
            [
                message("a1", "The BUG was fixed, finally."),
                message("a2", "debugging the fix"),
                MessageEntry(
                    id="a3",
                    timestamp="t",
                    message=Message(role="assistant", content=[{"type": "text", "text": "a bug"}]),
                ),
                compaction("a4", "bug summary is not searched", "a3"),
                message("a5", "bug_report and fixed-bug"),
            ],
        )
        await store.create(SessionMeta(id="b", owner="v"))
        await store.append("b", message("b1", "Fix the bug"))
        hits = await every_hit(store, "bug", limit=2)
        assert {(h.session_id, h.seq) for h in hits} == {("a", 1), ("a", 3), ("a", 5), ("b", 1)}
        by_entry = {h.entry_id: h for h in hits}
        assert by_entry["a3"].role == "assistant"
        assert by_entry["b1"].role == "user"
        for hit in hits:
            assert [hit.snippet[a:b].lower() for a, b in hit.highlights]
            assert all(hit.snippet[a:b].lower() == "bug" for a, b in hit.highlights)
        assert {h.entry_id for h in await store.search("fix bug")} == {"b1"}
        assert {h.entry_id for h in await store.search("BUG fixed")} == {"a1", "a5"}
        assert {h.entry_id for h in await store.search("bug", owner="v")} == {"b1"}
        assert await store.search("report bug", owner="v") == []
        assert await store.search("!!! ...") == []
        assert await store.search("nowhere") == []

    @needs(Capability.BRANCHES)
    async def test_search_finds_shared_messages_in_every_fork(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="p", owner="u"))
        await store.append_many("p", [message("m1", "alpha one"), message("m2", "alpha two")])
        await store.fork("p", at="m1", meta=SessionMeta(id="f1", owner="u"))
        await store.fork("f1", meta=SessionMeta(id="f2", owner="w"))
        await store.append("f1", message("m3", "alpha three"))
        hits = await every_hit(store, "alpha", limit=2)
        assert sorted((h.session_id, h.seq, h.entry_id) for h in hits) == [
            ("f1", 1, "m1"),
            ("f1", 2, "m3"),
            ("f2", 1, "m1"),
            ("p", 1, "m1"),
            ("p", 2, "m2"),
        ]
        assert {h.session_id for h in await store.search("alpha", owner="w")} == {"f2"}

    @needs(Capability.ERASURE)
    async def test_search_forgets_erased_sessions(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="s"))
        await store.append("s", message("m1", "confidential plan"))
        await store.erase("s", reason="asked")
        assert await store.search("confidential") == []
        await store.create(SessionMeta(id="s"))
        await store.append("s", message("m1", "public plan"))
        assert [h.snippet for h in await store.search("plan")] == ["public plan"]

    async def test_search_cursor_belongs_to_its_search(self, store: SessionStore) -> None:
        await store.create(SessionMeta(id="s"))
        await store.append_many("s", [message(f"m{n}", "same words") for n in range(3)])
        [first] = await store.search("same", limit=1)
        assert len(await store.search("SAME", limit=5, after=first.cursor)) == 2
        for bad in ("nope", first.cursor[:-2]):
            with pytest.raises(InvalidCursorError):
                await store.search("same", after=bad)
        with pytest.raises(InvalidCursorError):
            await store.search("words", after=first.cursor)
        with pytest.raises(ConfigurationError):
            await store.search("same", limit=0)
        with pytest.raises(ConfigurationError):
            await store.search(b"same")  # type: ignore[arg-type]

    async def test_a_search_cursor_of_a_key_no_hit_has_is_refused(
        self, store: SessionStore
    ) -> None:
        # A score of 0 or less, or not finite, or a position not a number: as forged.
        await store.create(SessionMeta(id="s"))
        await store.append("s", message("m1", "same words"))
        [hit] = await store.search("same")
        kind = Cursor.decode(hit.cursor, listing_kind("search", "same", None), length=3).kind
        for score, seq in (("0.0", "1"), ("-1.0", "1"), ("nan", "1"), ("inf", "1"), ("1.0", "x")):
            forged = Cursor(kind, "", (score, "s", seq)).encode()
            with pytest.raises(InvalidCursorError):
                await store.search("same", after=forged)

    async def test_search_ranks_the_better_match_first_and_snips_around_it(
        self, store: SessionStore
    ) -> None:
        await store.create(SessionMeta(id="s"))
        filler = " ".join(f"word{n}" for n in range(60))
        await store.append_many(
            "s", [message("long", f"rare {filler}"), message("short", "rare rare")]
        )
        assert [h.entry_id for h in await store.search("rare")] == ["short", "long"]
        text = " ".join(f"w{n}" for n in range(200)) + " needle\n<b>[/bold]</b> tail"
        await store.append("s", message("m1", text))
        [hit] = await store.search("needle")
        assert hit.snippet.startswith("…")
        assert "needle <b>[/bold]</b> tail" in hit.snippet
        assert len(hit.snippet) <= 210
        [(start, end)] = hit.highlights
        assert hit.snippet[start:end] == "needle"

    async def test_search_agrees_with_reading_every_message(self, store: SessionStore) -> None:
        """Random texts and queries, sessions made in no order of their ids,
        one a fork: the hits are exactly the messages a plain reading finds,
        each once, over every page, in the documented order."""
        vocabulary = ["Apple", "apple", "pie", "Pie!", "café", "CAFÉ", "x_y", "tea-time", "42"]
        text = st.lists(st.sampled_from(vocabulary), max_size=6).map(" ".join)
        runs = itertools.count()

        @examples(20)
        @given(
            st.lists(st.lists(text, max_size=4), min_size=1, max_size=4),
            st.lists(st.sampled_from(vocabulary), min_size=1, max_size=2).map(" ".join),
            st.integers(1, 4),
        )
        def check(sessions: list[list[str]], query: str, limit: int) -> None:
            owner = f"q{next(runs)}"

            async def run() -> None:
                ids = []
                for n, texts in enumerate(sessions):
                    made = SessionMeta(id=f"{owner}-{len(sessions) - n}", owner=owner)
                    session_id = await store.create(made)
                    entries = [message(f"e{k}", t) for k, t in enumerate(texts)]
                    await store.append_many(session_id, entries)
                    ids.append(session_id)
                # A fork sorting first, sharing the first session's messages
                # (on a store with branches).
                if sessions[0] and Capability.BRANCHES in store.capabilities:
                    fork = SessionMeta(id=f"{owner}-0", owner=owner)
                    ids.append((await store.fork(ids[0], meta=fork)).id)
                    await store.append(fork.id, message("more", sessions[0][0]))
                hits = await every_hit(store, query, owner=owner, limit=limit)
                found = [(h.session_id, h.seq) for h in hits]
                assert found == await expected_hits(store, query, ids)

            asyncio.run(run())

        await asyncio.to_thread(check)
