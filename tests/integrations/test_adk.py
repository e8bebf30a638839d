"""StoreSessionService against the real google-adk, on every store kind:
sessions and their state scopes, events given back exactly, reads that cost
what they return, listings, tenancy and erasure.

Without google-adk these tests skip (fail under CI=true): `require`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from tests.integrations import require

require("google.adk", extra="adk")

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as ADKNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

import sessionstore.integrations.adk as adk
from sessionstore import ConfigurationError, Message, MessageEntry, SessionStore
from sessionstore.integrations.adk import StoreSessionService
from sessionstore.integrations.adk_events import Names, owner_of
from tests.integrations.adk_scripted import text_of

APP, ANN, BOB = "shop", "ann", "bob"


def said(author: str, text: str, *, at: float | None = None, **delta: Any) -> Event:
    """An event saying ``text``, changing the state by ``delta``."""
    role = "user" if author == "user" else "model"
    return Event(
        invocation_id="inv-1",
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta),
        **({} if at is None else {"timestamp": at}),
    )


async def fetched(service: StoreSessionService, session: Session, **config: Any) -> Session:
    """``session`` read back (the `GetSessionConfig` of ``config``)."""
    got = await service.get_session(
        app_name=session.app_name,
        user_id=session.user_id,
        session_id=session.id,
        config=GetSessionConfig(**config) if config else None,
    )
    assert got is not None
    return got


# ---------------------------------------------------------------- state


async def test_a_new_session_keeps_each_state_scope_where_adk_does(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    state = {"topic": "tea", "app:greeting": "hi", "user:name": "Ann", "temp:draft": "x"}
    created = await service.create_session(app_name=APP, user_id=ANN, state=state)
    want = {"topic": "tea", "app:greeting": "hi", "user:name": "Ann"}
    assert created.state == want
    assert (await fetched(service, created)).state == want
    # The user's other session shares user: and app: state, not the session's own.
    second = await service.create_session(app_name=APP, user_id=ANN)
    assert second.state == {"app:greeting": "hi", "user:name": "Ann"}
    # Another user of the app shares only app: state.
    other = await service.create_session(app_name=APP, user_id=BOB)
    assert other.state == {"app:greeting": "hi"}
    assert await service.get_user_state(app_name=APP, user_id=ANN) == {"name": "Ann"}
    assert await service.get_user_state(app_name=APP, user_id=BOB) == {}


async def test_an_event_changes_every_scope_and_temp_state_is_never_stored(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN, state={"n": 1})
    neighbour = await service.create_session(app_name=APP, user_id=ANN)
    event = said("user", "hello", n=2, **{"app:hits": 1, "user:seen": True, "temp:scratch": 9})
    await service.append_event(session, event)
    # The session in hand sees temp: for the rest of the invocation...
    assert session.state["temp:scratch"] == 9
    # ...but what is stored, the event's delta included, never holds it.
    again = await fetched(service, session)
    assert again.state == {"n": 2, "app:hits": 1, "user:seen": True}
    assert "temp:scratch" not in again.events[0].actions.state_delta
    assert (await fetched(service, neighbour)).state == {"app:hits": 1, "user:seen": True}


async def test_a_state_key_set_to_none_stays_as_none_as_in_adk(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN, state={"k": 1})
    await service.append_event(session, said("user", "drop it", k=None))
    assert (await fetched(service, session)).state == {"k": None}


# ---------------------------------------------------------------- events


def rich_event() -> Event:
    """An event using most of what an ADK event holds."""
    call = types.FunctionCall(id="call-1", name="lookup", args={"q": "tea", "n": 2.5})
    answer = types.FunctionResponse(id="call-0", name="lookup", response={"found": [1, 2]})
    blob = types.Blob(mime_type="image/png", data=b"\x00\x01\xfe\xff")
    return Event(
        invocation_id="inv-7",
        author="shopper",
        branch="root.shopper",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="thinking...", thought=True),
                types.Part(text="Let me look."),
                types.Part(function_call=call),
                types.Part(function_response=answer),
                types.Part(inline_data=blob),
            ],
        ),
        actions=EventActions(
            state_delta={"cart": ["tea"], "app:views": 3},
            artifact_delta={"receipt.txt": 2},
            transfer_to_agent="cashier",
            skip_summarization=True,
        ),
        long_running_tool_ids={"call-1"},
        custom_metadata={"trace": {"span": 7}},
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=11),
        turn_complete=True,
        timestamp=1_800_000_000.123456,
    )


async def test_events_come_back_exactly_as_appended(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN)
    appended = [said("user", "hi"), rich_event(), said("shopper", "done", at=1_800_000_001.5)]
    for event in appended:
        await service.append_event(session, event)
    again = await fetched(service, session)
    assert again.events == appended
    assert [e.model_dump() for e in again.events] == [e.model_dump() for e in appended]
    assert again.last_update_time == 1_800_000_001.5


async def test_an_event_reads_as_a_message_every_view_shows(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN)
    await service.append_event(session, said("user", "Where is my tea?"))
    await service.append_event(session, rich_event())
    names = Names.of(APP, ANN, session.id)
    entries = [e for e in await async_store.load(names.base) if isinstance(e, MessageEntry)]
    first, asked, answered = (entry.message for entry in entries)
    assert first.role == "system"
    assert session.id in first.text()
    assert (asked.role, asked.content) == ("user", "Where is my tea?")
    assert answered.role == "assistant"
    kinds = [block["type"] for block in answered.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_result", "inline_data"]
    assert answered.content[2] == {
        "type": "tool_use",
        "id": "call-1",
        "name": "lookup",
        "input": {"q": "tea", "n": 2.5},
    }
    hits = await async_store.search("tea", owner=owner_of(APP, ANN))
    assert [hit.entry_id for hit in hits] == [entries[1].id]


async def test_a_value_json_cannot_carry_is_stored_as_its_text_as_adk_does(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN)
    await service.append_event(session, said("user", "odd", k=print))
    assert (await fetched(service, session)).state == {"k": "<built-in function print>"}


async def test_state_values_are_stored_as_their_json_form(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    session = await service.create_session(app_name=APP, user_id=ANN, state={"at": when})
    delta: dict[str, Any] = {"user:at": when, "tags": {"b"}}
    await service.append_event(session, said("user", "tags", **delta))
    text = "2026-01-02T03:04:05Z"  # as pydantic writes it, and ADK's database service
    assert (await fetched(service, session)).state == {"at": text, "tags": ["b"], "user:at": text}


async def test_a_partial_event_is_not_stored(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN)
    partial = said("shopper", "stream")
    partial.partial = True
    assert await service.append_event(session, partial) is partial
    assert (await fetched(service, session)).events == []


async def test_a_message_another_writer_appended_reads_as_a_text_event(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN, state={"k": 1})
    await service.append_event(session, said("user", "first"))
    base = Names.of(APP, ANN, session.id).base
    await async_store.append(base, MessageEntry.new(Message.assistant("from elsewhere")))
    again = await fetched(service, session)
    assert [text_of(e) for e in again.events] == [
        "first",
        "from elsewhere",
    ]
    assert again.state == {"k": 1}
    await service.append_event(again, said("user", "next", k=2))
    assert (await fetched(service, session)).state == {"k": 2}


# ---------------------------------------------------------------- reads


class CountingStore:
    """A store that counts the entries each read gives back, and whole reads."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self.entries_read = 0
        self.whole_reads = 0
        self.raw_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def load_slice(self, session_id: str, start: int = 0, stop: int | None = None) -> Any:
        read = await self._store.load_slice(session_id, start, stop)
        self.entries_read += len(read.entries)
        return read

    async def load(self, session_id: str) -> Any:
        self.whole_reads += 1
        return await self._store.load(session_id)

    def iter_entries(self, session_id: str) -> AsyncGenerator[Any, None]:
        self.whole_reads += 1
        return self._store.iter_entries(session_id)

    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        self.raw_reads += 1  # a view's check of a header reads its first line
        return self._store.raw_lines(session_id)


async def test_the_last_events_cost_what_they_return(async_store: SessionStore) -> None:
    counting = CountingStore(async_store)
    service = StoreSessionService(cast(SessionStore, counting))
    session = await service.create_session(app_name=APP, user_id=ANN, state={"n": 0})
    events = [said("user", f"message {n}", at=1000.0 + n, n=n) for n in range(60)]
    for event in events:
        await service.append_event(session, event)
    counting.entries_read = 0
    recent = await fetched(service, session, num_recent_events=5)
    assert recent.events == events[-5:]
    assert recent.state == {"n": 59}
    assert counting.entries_read <= 5 + 1
    counting.entries_read = 0
    none = await fetched(service, session, num_recent_events=0)
    assert none.events == []
    assert none.state == {"n": 59}
    assert none.last_update_time == 1059.0
    assert counting.entries_read <= 2
    assert counting.whole_reads == 0


async def test_after_timestamp_gives_the_events_from_that_time(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN)
    events = [said("user", f"m{n}", at=100.0 + n) for n in range(80)]
    for event in events:
        await service.append_event(session, event)
    assert (await fetched(service, session, after_timestamp=175.0)).events == events[75:]
    both = await fetched(service, session, after_timestamp=175.0, num_recent_events=3)
    assert both.events == events[-3:]
    assert (await fetched(service, session, after_timestamp=50.0)).events == events


async def test_an_unknown_session_reads_as_none(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    assert await service.get_session(app_name=APP, user_id=ANN, session_id="nope") is None


# ---------------------------------------------------------------- sessions


async def test_an_existing_id_is_refused_as_adk_refuses_it(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    await service.create_session(app_name=APP, user_id=ANN, session_id="s1", state={"k": 1})
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id=ANN, session_id="s1")
    # The same id under another user is another session.
    theirs = await service.create_session(app_name=APP, user_id=BOB, session_id="s1")
    assert theirs.state == {}


async def test_session_ids_the_store_would_refuse_still_work(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    for session_id in ["a/b", ".hidden", "x" * 300, "tab\there", "ünï"]:
        session = await service.create_session(app_name=APP, user_id=ANN, session_id=session_id)
        await service.append_event(session, said("user", session_id))
        again = await fetched(service, session)
        assert again.id == session_id
        assert text_of(again.events[0]) == session_id


async def test_a_padded_session_id_names_the_stripped_one_as_in_adk(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    made = await service.create_session(app_name=APP, user_id=ANN, session_id=" order-42\n")
    assert made.id == "order-42"
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id=ANN, session_id="order-42  ")
    padded = Session(id="\torder-42", app_name=APP, user_id=ANN)  # one the caller made
    await service.append_event(padded, said("user", "hi", k=1))
    got = await service.get_session(app_name=APP, user_id=ANN, session_id="order-42\n")
    assert got is not None
    assert got.id == "order-42"
    assert [text_of(e) for e in got.events] == ["hi"]
    assert got.state == {"k": 1}
    await service.delete_session(app_name=APP, user_id=ANN, session_id=" order-42 ")
    assert await service.get_session(app_name=APP, user_id=ANN, session_id="order-42") is None
    # A blank id is no id: a new one is made.
    blank = await service.create_session(app_name=APP, user_id=ANN, session_id="   ")
    assert blank.id.strip() == blank.id
    assert len(blank.id) == 36


async def test_a_user_reaches_only_their_own_sessions(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    mine = await service.create_session(app_name=APP, user_id=ANN, session_id="s")
    await service.append_event(mine, said("user", "secret"))
    assert await service.get_session(app_name=APP, user_id=BOB, session_id="s") is None
    assert await service.get_session(app_name="other", user_id=ANN, session_id="s") is None
    await service.delete_session(app_name=APP, user_id=BOB, session_id="s")
    assert len((await fetched(service, mine)).events) == 1
    assert await async_store.search("secret", owner=owner_of(APP, BOB)) == []
    # An owner names its pair unambiguously.
    assert owner_of("a:b", "c") != owner_of("a", "b:c")


async def test_sessions_are_listed_per_user_and_per_app(
    async_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adk, "_PAGE", 2)  # several pages of summaries
    service = StoreSessionService(async_store)
    made = []
    for n, user in enumerate([ANN, BOB, ANN, ANN, BOB]):
        session = await service.create_session(
            app_name=APP, user_id=user, session_id=f"s{n}", state={"n": n, "user:u": user}
        )
        await service.append_event(session, said("user", "hi", at=500.0 - n))
        made.append(session)
    await service.create_session(app_name="elsewhere", user_id=ANN)
    listed = (await service.list_sessions(app_name=APP, user_id=ANN)).sessions
    assert [s.id for s in listed] == ["s3", "s2", "s0"]  # the least recently updated first
    assert [s.state for s in listed] == [{"n": n, "user:u": ANN} for n in (3, 2, 0)]
    assert all(s.events == [] for s in listed)
    everyone = (await service.list_sessions(app_name=APP)).sessions
    assert [(s.user_id, s.id) for s in everyone] == [
        (BOB, "s4"),
        (ANN, "s3"),
        (ANN, "s2"),
        (BOB, "s1"),
        (ANN, "s0"),
    ]
    assert (await service.list_sessions(app_name="nobody")).sessions == []


async def listed_in_pages(service: StoreSessionService, size: int) -> list[list[str]]:
    """The ids of Ann's sessions, page by page of ``size``."""
    pages, token = [], None
    while True:
        page = await service.list_sessions(
            app_name=APP, user_id=ANN, page_size=size, page_token=token
        )
        assert isinstance(page, adk.SessionPage)
        times = [s.last_update_time for s in page.sessions]
        assert times == sorted(times)  # each page sorted as ADK sorts
        pages.append([s.id for s in page.sessions])
        token = page.next_page_token
        if token is None:
            return pages


async def test_sessions_are_listed_a_page_at_a_time(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    for n in range(5):
        session = await service.create_session(
            app_name=APP, user_id=ANN, session_id=f"s{n}", state={"n": n}
        )
        await service.append_event(session, said("user", "hi", at=100.0 + n))
    await service.create_session(app_name=APP, user_id=BOB, session_id="b")
    pages = await listed_in_pages(service, 2)
    # The most recently active first, each page sorted oldest first; each session once.
    assert pages == [["s3", "s4"], ["s1", "s2"], ["s0"]]
    [first] = (await service.list_sessions(app_name=APP, user_id=ANN, page_size=1)).sessions
    assert (first.id, first.state, first.events) == ("s4", {"n": 4}, [])
    assert first.last_update_time == 104.0
    # Without page_size: every session, as ADK lists them, and no token.
    whole = await service.list_sessions(app_name=APP, user_id=ANN)
    assert [s.id for s in whole.sessions] == ["s0", "s1", "s2", "s3", "s4"]
    assert whole.next_page_token is None


async def test_a_rewound_session_is_paged_once_as_where_it_goes_on(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN, session_id="r")
    for invocation in ("one", "two"):
        event = said("user", invocation, n=invocation)
        event.invocation_id = invocation
        await service.append_event(session, event)
    rewind = Event(
        invocation_id="back",
        author="user",
        actions=EventActions(rewind_before_invocation_id="two"),
    )
    await service.append_event(session, rewind)
    await service.create_session(app_name=APP, user_id=ANN, session_id="other")
    assert sorted(i for page in await listed_in_pages(service, 1) for i in page) == ["other", "r"]
    [paged] = [
        s
        for s in (await service.list_sessions(app_name=APP, user_id=ANN, page_size=5)).sessions
        if s.id == "r"
    ]
    assert paged.state == (await fetched(service, session)).state


async def test_a_bad_page_is_refused_by_name(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    for user in (ANN, BOB):
        for n in range(3):
            await service.create_session(app_name=APP, user_id=user, session_id=f"s{n}")
    for size in (0, -1, True, "2", 1.5):
        with pytest.raises(ConfigurationError, match="page_size"):
            await service.list_sessions(app_name=APP, user_id=ANN, page_size=size)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="user_id"):
        await service.list_sessions(app_name=APP, page_size=2)
    with pytest.raises(ConfigurationError, match="page_size"):
        await service.list_sessions(app_name=APP, user_id=ANN, page_token="x")
    bobs = await service.list_sessions(app_name=APP, user_id=BOB, page_size=2)
    assert bobs.next_page_token is not None
    refusals = []
    for token in (bobs.next_page_token, "not-a-token", ""):
        with pytest.raises(ConfigurationError, match="page_token") as refused:
            await service.list_sessions(app_name=APP, user_id=ANN, page_size=2, page_token=token)
        refusals.append(str(refused.value))
    # Bob's token, to Ann's listing, says nothing of Bob.
    assert BOB not in refusals[0]
    assert bobs.next_page_token not in refusals[0]


async def test_deleting_a_session_erases_it_and_records_why(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN, session_id="s")
    await service.append_event(session, said("user", "forget me"))
    await service.delete_session(app_name=APP, user_id=ANN, session_id="s")
    assert await service.get_session(app_name=APP, user_id=ANN, session_id="s") is None
    [erasure] = await async_store.erasures()
    assert erasure.reason == "ADK delete_session"
    assert erasure.lines == 2
    assert await async_store.search("forget", owner=owner_of(APP, ANN)) == []
    with pytest.raises(ADKNotFoundError):
        await service.append_event(session, said("user", "too late"))
    # Deleting again is fine, and the id is free for a new session.
    await service.delete_session(app_name=APP, user_id=ANN, session_id="s")
    fresh = await service.create_session(app_name=APP, user_id=ANN, session_id="s")
    assert (await fetched(service, fresh)).events == []


async def test_a_stale_session_in_hand_appends_after_what_others_wrote(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    created = await service.create_session(app_name=APP, user_id=ANN, state={"a": 0})
    first, second = await fetched(service, created), await fetched(service, created)
    await service.append_event(first, said("user", "from first", a=1))
    # ``second`` has not seen that event: its append lands after it, state merged.
    await service.append_event(second, said("user", "from second", b=2))
    again = await fetched(service, created)
    assert [text_of(e) for e in again.events] == ["from first", "from second"]
    assert again.state == {"a": 1, "b": 2}


async def test_any_app_and_user_names_work(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    for app, user in [("a/b", "c"), ("a", "b/c"), ("ä:\t", ".x"), ("x" * 300, "y" * 300)]:
        session = await service.create_session(
            app_name=app, user_id=user, session_id="s", state={"app:a": app, "user:u": user}
        )
        await service.append_event(session, said("user", f"{app} {user}"))
        again = await fetched(service, session)
        assert again.state == {"app:a": app, "user:u": user}
        [listed] = (await service.list_sessions(app_name=app)).sessions
        assert (listed.app_name, listed.user_id, listed.id) == (app, user, "s")
        await service.delete_session(app_name=app, user_id=user, session_id="s")
    assert await async_store.list() == []


async def test_an_append_retried_after_it_landed_is_stored_once(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    created = await service.create_session(app_name=APP, user_id=ANN)
    held, retried = await fetched(service, created), await fetched(service, created)
    event = said("user", "once", n=1)
    await service.append_event(held, event)
    # A caller that lost the answer sends the same event again, from where it stood.
    await service.append_event(retried, event)
    again = await fetched(service, created)
    assert again.events == [event]
    # An event that only shares the id is another event, and is stored.
    other = said("user", "twice", n=2)
    other.id = event.id
    await service.append_event(again, other)
    assert [text_of(e) for e in (await fetched(service, created)).events] == ["once", "twice"]


async def test_a_whole_read_again_reads_only_what_was_appended_since(
    async_store: SessionStore,
) -> None:
    counting = CountingStore(async_store)
    service = StoreSessionService(cast(SessionStore, counting))
    session = await service.create_session(app_name=APP, user_id=ANN)
    for n in range(30):
        await service.append_event(session, said("user", f"m{n}", n=n))
    assert len((await fetched(service, session)).events) == 30
    # Another service (another process, say) appends; the first reads on, exactly.
    other = StoreSessionService(async_store)
    await other.append_event(await fetched(other, session), said("user", "from elsewhere"))
    counting.entries_read = 0
    again = await fetched(service, session)
    assert [text_of(e) for e in again.events][-2:] == ["m29", "from elsewhere"]
    assert again.state == {"n": 29}
    assert counting.entries_read <= 3  # the last kept, the new one, the state's
    # What a read hands out is its own: changing it changes no later read.
    again.events[0].content = None
    assert text_of((await fetched(service, session)).events[0]) == "m0"
    service.forget_events()
    counting.entries_read = 0
    assert len((await fetched(service, session)).events) == 31
    assert counting.entries_read >= 32


async def test_a_session_deleted_and_made_again_is_read_afresh(async_store: SessionStore) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN, session_id="s")
    await service.append_event(session, said("user", "old"))
    assert len((await fetched(service, session)).events) == 1
    await StoreSessionService(async_store).delete_session(app_name=APP, user_id=ANN, session_id="s")
    fresh = await service.create_session(app_name=APP, user_id=ANN, session_id="s")
    await service.append_event(fresh, said("user", "new"))
    assert [text_of(e) for e in (await fetched(service, fresh)).events] == ["new"]


async def test_an_append_in_turn_reads_nothing_back(async_store: SessionStore) -> None:
    counting = CountingStore(async_store)
    service = StoreSessionService(cast(SessionStore, counting))
    session = await service.create_session(app_name=APP, user_id=ANN, state={"a": 1})
    counting.entries_read = counting.raw_reads = 0
    # The session in hand knows where the session ends and its state: no entry is read.
    for n in range(5):
        await service.append_event(session, said("user", f"m{n}", a=n))
        await service.append_event(session, said("model", f"r{n}"))
    assert counting.entries_read == 0
    assert counting.raw_reads == 0  # nor any header: the append is conditional on the owner's head
    assert (await fetched(service, session)).state == {"a": 4}


async def test_a_session_in_hand_renamed_to_another_user_reaches_only_theirs(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    anns = await service.create_session(app_name=APP, user_id=ANN, session_id="s")
    await service.append_event(anns, said("user", "ann's"))
    # Ann's session object, its storage marker naming Ann's store session, told it is Bob's.
    renamed = anns.model_copy(update={"user_id": BOB})
    renamed._storage_update_marker = anns._storage_update_marker
    with pytest.raises(ADKNotFoundError):
        await service.append_event(renamed, said("user", "bob's"))
    bobs = await service.create_session(app_name=APP, user_id=BOB, session_id="s")
    await service.append_event(renamed, said("user", "bob's"))
    assert [text_of(e) for e in (await fetched(service, anns)).events] == ["ann's"]
    assert [text_of(e) for e in (await fetched(service, bobs)).events] == ["bob's"]
