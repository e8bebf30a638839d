"""HTML transcripts (`sessionstore.transcript`): a page per session, read back
with the standard library's parser as a browser would build it."""

from __future__ import annotations

import io
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    CompactionEntry,
    MemoryStore,
    Message,
    MessageEntry,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    open_store,
)
from sessionstore.transcript import export_html, render_html, write_html
from tests.dialects import FORECAST, require_frameworks, write_every_dialect
from tests.kinds import STORE_KINDS, StoreTargets
from tests.page import Element, parse

STAMP = "2026-01-02T03:04:05Z"


def entry(entry_id: str, message: Message) -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp=STAMP, message=message)


def openai_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def page_of(store: SessionStore, session_id: str) -> Element:
    out = io.StringIO()
    await write_html(store, session_id, out)
    return parse(out.getvalue())


def articles(page: Element) -> dict[str, Element]:
    """The entries' blocks, by the entry id each shows."""
    return {a.find(cls="entry-id").text(): a for a in page.find_all("article")}


async def conversation(store: SessionStore, session_id: str = "chat") -> None:
    """A system prompt, a tool exchange (OpenAI shape), a compaction keeping
    from the tool call on, and an answer."""
    await store.create(SessionMeta(id=session_id, created_at=STAMP))
    await store.append_many(
        session_id,
        [
            entry("e1", Message.system("be brief")),
            entry("e2", Message.user("weather in Paris?")),
            entry(
                "e3",
                Message(
                    role="assistant",
                    content="",
                    tool_calls=[openai_call("call-1", "weather", '{"city":"Paris"}')],
                ),
            ),
            entry("e4", Message(role="tool", content="18C, sunny", tool_call_id="call-1")),
            CompactionEntry(
                id="c1", timestamp=STAMP, summary="asked for weather", first_kept_id="e3"
            ),
            entry("e5", Message.assistant("18C and sunny.")),
        ],
    )


@pytest.fixture
async def memory() -> AsyncIterator[SessionStore]:
    async with MemoryStore() as store:
        yield store


@pytest.fixture(params=STORE_KINDS)
async def store(
    request: pytest.FixtureRequest, store_targets: StoreTargets
) -> AsyncIterator[SessionStore]:
    async with open_store(store_targets.new(request.param)) as opened:
        yield opened


# ---------------------------------------------------------------- structure


async def test_every_entry_is_one_article_with_its_role_as_a_class(store: SessionStore) -> None:
    await conversation(store)
    page = await page_of(store, "chat")
    blocks = articles(page)
    assert list(blocks) == ["e1", "e2", "e3", "e4", "c1", "e5"]
    assert "role-system" in blocks["e1"].classes
    assert "role-user" in blocks["e2"].classes
    assert "role-assistant" in blocks["e3"].classes
    assert "role-tool" in blocks["e4"].classes
    assert "compaction" in blocks["c1"].classes
    assert blocks["e5"].find(cls="timestamp").text() == STAMP


async def test_what_the_model_sees_is_marked_and_the_rest_is_not(store: SessionStore) -> None:
    await conversation(store)
    page = await page_of(store, "chat")
    marked = {i for i, block in articles(page).items() if "in-context" in block.classes}
    assert marked == {"e3", "e4", "c1", "e5"}  # the summary, then from first_kept_id on
    legend = page.find(cls="legend").text()
    assert "in the model's context" in legend
    assert "4 messages" in legend


async def test_a_compaction_shows_its_summary_and_links_where_the_context_starts(
    memory: SessionStore,
) -> None:
    await conversation(memory)
    block = articles(await page_of(memory, "chat"))["c1"]
    assert block.find(cls="summary").text() == "asked for weather"
    link = block.find("a")
    assert link.attrs["href"] == "#entry-e3"
    assert articles(await page_of(memory, "chat"))["e3"].attrs["id"] == "entry-e3"


async def test_an_openai_tool_call_is_folded_and_its_result_links_back(
    memory: SessionStore,
) -> None:
    await conversation(memory)
    blocks = articles(await page_of(memory, "chat"))
    call = blocks["e3"].find("details", "tool-call")
    assert call.attrs["data-call-id"] == "call-1"
    assert call.find("summary").find(cls="tool-name").text() == "weather"
    assert call.find("pre").text() == '{"city":"Paris"}'
    result = blocks["e4"].find("details", "tool-result")
    assert "paired" in result.classes
    assert result.find("a", "pair").attrs["href"] == f"#{call.attrs['id']}"
    assert result.find(cls="text").text() == "18C, sunny"


async def test_anthropic_tool_use_blocks_pair_with_their_tool_results(
    memory: SessionStore,
) -> None:
    await memory.create(SessionMeta(id="claude"))
    use = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}
    await memory.append_many(
        "claude",
        [
            entry(
                "a1",
                Message(role="assistant", content=[{"type": "text", "text": "Let me look."}, use]),
            ),
            entry("a2", Message(role="user", content=[answer])),
        ],
    )
    blocks = articles(await page_of(memory, "claude"))
    assert blocks["a1"].find(cls="text").text() == "Let me look."
    call = blocks["a1"].find("details", "tool-call")
    assert call.find(cls="json").text() == '{"q":"x"}'
    result = blocks["a2"].find("details", "tool-result")
    assert result.find("a", "pair").attrs["href"] == f"#{call.attrs['id']}"
    assert result.find(cls="text").text() == "found"


async def test_openai_agents_items_pair_whether_fields_or_content(memory: SessionStore) -> None:
    await memory.create(SessionMeta(id="agents"))
    output = {"type": "function_call_output", "call_id": "fc_1", "output": "done"}
    await memory.append_many(
        "agents",
        [
            entry(
                "g1",
                Message(
                    role="assistant",
                    content="",
                    type="function_call",
                    call_id="fc_1",
                    name="run",
                    arguments="{}",
                ),
            ),
            entry("g2", Message(role="tool", content=[output])),
        ],
    )
    blocks = articles(await page_of(memory, "agents"))
    call = blocks["g1"].find("details", "tool-call")
    assert call.find(cls="tool-name").text() == "run"
    assert not blocks["g1"].find_all(cls="fields")  # the item's fields are the call
    result = blocks["g2"].find("details", "tool-result")
    assert "paired" in result.classes
    assert result.find(cls="text").text() == "done"


@pytest.mark.parametrize(
    "dialect", ["openai", "anthropic", "openai-agents", "langchain", "pydantic-ai"]
)
async def test_each_writer_s_tool_call_and_result_are_named_and_paired(
    memory: SessionStore, dialect: str
) -> None:
    require_frameworks()
    sessions = await write_every_dialect(memory)
    asked, answered = list(articles(await page_of(memory, sessions[dialect])).values())[1:3]
    assert asked.find(cls="role").text() == "tool call"  # what `show` labels it too
    call = asked.find("details", "tool-call")
    assert call.find(cls="tool-name").text() == "get_weather"
    assert "Lisbon" in call.find("pre").text()
    assert answered.find(cls="role").text() == "tool result"
    result = answered.find("details", "tool-result")
    assert "paired" in result.classes
    assert result.find("a", "pair").find(cls="tool-name").text() == "get_weather"
    assert result.find(cls="text").text() == FORECAST


async def test_a_result_whose_call_is_not_on_the_page_is_marked_unpaired(
    memory: SessionStore,
) -> None:
    await memory.create(SessionMeta(id="s"))
    await memory.append("s", entry("t1", Message(role="tool", content="x", tool_call_id="gone")))
    result = articles(await page_of(memory, "s"))["t1"].find("details", "tool-result")
    assert "unpaired" in result.classes
    assert not result.find_all("a")


async def test_parts_that_are_not_text_are_shown_as_json(memory: SessionStore) -> None:
    await memory.create(SessionMeta(id="s"))
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    content = [{"type": "text", "text": "look:"}, image]
    await memory.append("s", entry("p1", Message(role="user", content=content, name="ann")))
    block = articles(await page_of(memory, "s"))["p1"]
    assert block.find(cls="text").text() == "look:"
    shown = [pre.text() for pre in block.find_all("pre", "json")]
    assert shown[0] == '{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}'
    assert shown[1] == '{"name":"ann"}'  # the other fields, folded
    assert not block.find_all("img")  # no fetch: an image part stays text


async def test_a_fork_names_and_links_its_parent_page_relatively(store: SessionStore) -> None:
    await conversation(store, "parent")
    await store.fork("parent", at="e2", meta=SessionMeta(id="child", created_at=STAMP))
    page = await page_of(store, "child")
    link = page.find("a")
    assert link.attrs["rel"] == "up"
    assert link.attrs["href"] == "parent.html"
    assert link.text() == "parent"
    assert page.find(cls="session-id").text() == "child"
    assert page.find(cls="created").text() == STAMP
    assert list(articles(page)) == ["e1", "e2"]


async def test_a_missing_session_yields_nothing_and_raises(memory: SessionStore) -> None:
    chunks = render_html(memory, "nobody")
    with pytest.raises(SessionNotFoundError):
        await anext(chunks)


async def test_the_page_fetches_nothing_and_runs_nothing(memory: SessionStore) -> None:
    await conversation(memory)
    page = await page_of(memory, "chat")
    tags = {e.tag for e in page.walk()}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base", "form"}
    hrefs = [a.attrs["href"] or "" for a in page.find_all("a")]
    assert all(h.startswith("#") or h.endswith(".html") for h in hrefs)
    policy = next(m.attrs["content"] for m in page.find_all("meta") if m.attrs.get("http-equiv"))
    assert policy is not None
    assert "default-src 'none'" in policy
    assert "content-visibility:auto" in page.find("style").text()  # huge pages stay cheap


# ---------------------------------------------------------------- escaping

HOSTILE = [
    "<script>alert(1)</script>",
    "</details></article><script>alert(2)</script>",
    '<img src=x onerror="alert(3)">',
    "\"' onmouseover=alert(4) x='",
    "</style><script>alert(5)</script>",
    "<!-- -->&amp;&lt;",
]


async def test_stored_text_is_shown_literally_never_as_markup(memory: SessionStore) -> None:
    session_id = '<b>"it\'s"<b> &amp;'
    parent = 'x" onload="alert(6)'
    await memory.create(SessionMeta(id=parent))
    await memory.create(
        SessionMeta(id=session_id, parent_session=parent, created_at='<i>"now"</i>')
    )
    entries: list[MessageEntry | CompactionEntry] = []
    for number, text in enumerate(HOSTILE):
        entries.append(
            MessageEntry(
                id=f"id\"{number}'<script>",
                timestamp=f"<t>{number}",
                message=Message(
                    role=f"<{text}>", content=text, tool_calls=[openai_call(text, text, text)]
                ),
            )
        )
        entries.append(
            entry(
                f"r{number}",
                Message(role="tool", content=[{"type": "text", "text": text}], tool_call_id=text),
            )
        )
    entries.append(
        CompactionEntry(id="c", timestamp=STAMP, summary=HOSTILE[1], first_kept_id=HOSTILE[3])
    )
    await memory.append_many(session_id, entries)

    page = await page_of(memory, session_id)

    elements = list(page.walk())
    assert not [e for e in elements if e.tag in ("script", "img", "b", "i", "t")]
    assert not [(e.tag, a) for e in elements for a in e.attrs if a.lower().startswith("on")]
    assert page.find(cls="session-id").text() == session_id
    assert page.find(cls="created").text() == '<i>"now"</i>'
    assert page.find("a").text() == parent
    assert page.find("title").text() == f"session {session_id}"
    blocks = page.find_all("article")
    assert len(blocks) == 2 * len(HOSTILE) + 1
    for number, text in enumerate(HOSTILE):
        call, result = blocks[2 * number], blocks[2 * number + 1]
        assert call.find(cls="entry-id").text() == f"id\"{number}'<script>"
        assert call.find(cls="role").text() == f"<{text}>"
        assert "role-other" in call.classes
        assert call.find(cls="timestamp").text() == f"<t>{number}"
        assert call.find(cls="text").text() == text
        assert call.find("details", "tool-call").attrs["data-call-id"] == text
        assert call.find(cls="tool-name").text() == text
        assert result.find(cls="text").text() == text
    assert blocks[-1].find(cls="summary").text() == HOSTILE[1]


async def test_controls_and_bidi_overrides_are_shown_as_escapes(memory: SessionStore) -> None:
    await memory.create(SessionMeta(id="s"))
    text = "pay\u202eeulav\u202c \x00\x07\x1b[31m\x85 ok\n\tnext"
    await memory.append("s", entry("e\u202e1", Message.user(text)))
    block = articles(await page_of(memory, "s"))["e\\u202e1"]
    shown = block.find(cls="text").text()
    assert shown == "pay\\u202eeulav\\u202c \\x00\\x07\\x1b[31m\\x85 ok\n\tnext"
    assert block.attrs["id"] == "entry-e%E2%80%AE1"  # percent-encoded in the anchor


# ---------------------------------------------------------------- large sessions


class _Counter(io.TextIOBase):
    """A sink that keeps nothing: how much was written, and the last chunk."""

    def __init__(self) -> None:
        self.size = 0
        self.last = ""

    def write(self, text: str) -> int:
        self.size += len(text)
        self.last = text
        return len(text)


async def _render_peak(where: Path, count: int) -> tuple[int, int, _Counter]:
    """A page of a compacted session of ``count`` long messages: the peak of
    memory allocated while it is written, the bytes of its messages, the sink."""
    text = "a line of conversation, " * 20
    async with open_store(f"sqlite:///{where}") as store:
        await store.create(SessionMeta(id="big"))
        batch: list[MessageEntry | CompactionEntry] = []
        for number in range(count):
            role = "user" if number % 2 else "assistant"
            batch.append(entry(f"m{number}", Message(role=role, content=text)))
            if len(batch) == 5000:
                await store.append_many("big", batch)
                batch = []
        # A long session is compacted: what the model sees is a window, not the log.
        cut = CompactionEntry(id="c", timestamp=STAMP, summary="s", first_kept_id=f"m{count - 10}")
        await store.append_many("big", [*batch, cut])
        out = _Counter()
        tracemalloc.start()
        try:
            await write_html(store, "big", out)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, count * len(text), out


async def test_a_long_session_renders_in_memory_that_does_not_grow_with_it(
    tmp_path: Path,
) -> None:
    small, _, _ = await _render_peak(tmp_path / "small.db", 5_000)
    large, stored, out = await _render_peak(tmp_path / "large.db", 25_000)
    assert out.size > stored  # the page holds every entry...
    assert out.last.endswith("</html>\n")
    # ...yet 20,000 more messages (some 9.6 MB) cost the page well under one
    # MB more: a read batch and the window are held, never the session.
    assert large - small < 1_000_000, (small, large)


# ---------------------------------------------------------------- a directory of pages


async def test_export_html_writes_a_page_per_session_that_link_up(
    store: SessionStore, tmp_path: Path
) -> None:
    await conversation(store, "parent")
    await store.fork("parent", at="e2", meta=SessionMeta(id="child"))
    failed = await export_html(store, tmp_path / "html")
    assert failed == []
    assert sorted(p.name for p in (tmp_path / "html").iterdir()) == ["child.html", "parent.html"]
    child = parse((tmp_path / "html" / "child.html").read_text(encoding="utf-8"))
    href = child.find("a").attrs["href"]
    assert href is not None
    assert (tmp_path / "html" / href).is_file()


async def test_export_html_reports_a_session_it_cannot_find(
    memory: SessionStore, tmp_path: Path
) -> None:
    await conversation(memory)
    failed = await export_html(memory, tmp_path, sessions=["chat", "nobody"])
    assert [session for session, _ in failed] == ["nobody"]
    assert (tmp_path / "chat.html").is_file()
    assert not list(tmp_path.glob(".*"))  # no temporary file left
