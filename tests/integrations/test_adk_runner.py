"""StoreSessionService under a real ADK ``Runner``: an agent with a tool on a
scripted model over several turns, what ``sessionstore show`` prints of it,
rewinds as forks, and runs racing on one session.

Without google-adk these tests skip (fail under CI=true): `require`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integrations import require

require("google.adk", extra="adk")

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.runners import Runner
from google.adk.sessions.session import Session
from google.genai import types

from sessionstore import MessageEntry, ScopedStore, SessionStore, open_store
from sessionstore.integrations.adk import StoreSessionService
from sessionstore.integrations.adk_events import Names, event_of
from tests.cli.helpers import run
from tests.integrations.adk_scripted import (
    ScriptedLlm,
    agent_on,
    calls,
    says,
    text_of,
    user_text,
)
from tests.kinds import PERSISTENT_KINDS, SEALED_KINDS, StoreTargets

APP, ANN = "shop", "ann"


@pytest.fixture(autouse=True)
def quiet_adk() -> Iterator[None]:
    """ADK warns of every response without token counts; the scripted ones have none."""
    logger = logging.getLogger("google_adk")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


async def turn(runner: Runner, session_id: str, text: str) -> list[Event]:
    """One user turn through the runner: the events it made."""
    message = user_text(text)
    return [
        event
        async for event in runner.run_async(user_id=ANN, session_id=session_id, new_message=message)
    ]


async def session_of(service: StoreSessionService, session_id: str) -> Session:
    """Ann's session ``session_id``, as the service reads it."""
    session = await service.get_session(app_name=APP, user_id=ANN, session_id=session_id)
    assert session is not None
    return session


def test_a_conversation_with_a_tool_shows_in_sessionstore_show(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "sessions.db")
    model = ScriptedLlm(
        script=[
            calls("weather", "call-1", city="Paris"),
            says("It is sunny in Paris."),
            says("You are welcome."),
        ]
    )

    async def converse() -> tuple[str, list[Event]]:
        """Two turns; the id of the store session, and the events made."""
        async with open_store(db) as store:
            service = StoreSessionService(store)
            runner = Runner(agent=agent_on(model), app_name=APP, session_service=service)
            session = await service.create_session(app_name=APP, user_id=ANN)
            made = await turn(runner, session.id, "What is the weather in Paris?")
            made += await turn(runner, session.id, "Thanks!")
            stored = await session_of(service, session.id)
            assert stored.state == {"last_answer": "You are welcome."}
            # The model was sent the whole conversation, read back from the store.
            assert [text_of(Event(content=c)) for c in model.seen[-1]][-2:] == [
                "It is sunny in Paris.",
                "Thanks!",
            ]
            where = await service.store_session_id(app_name=APP, user_id=ANN, session_id=session.id)
            assert where == Names.of(APP, ANN, session.id).base
            return where, made

    shown, made = asyncio.run(converse())
    status, out, _ = run(capsys, "--db", db, "show", shown)
    assert status == 0
    texts = [line.split("\t")[4] for line in out.splitlines()[1:]]
    assert texts[1:] == [
        "What is the weather in Paris?",
        'weather({"city":"Paris"})',
        'weather → {"city": "Paris", "forecast": "sunny in Paris"}',
        "It is sunny in Paris.",
        "Thanks!",
        "You are welcome.",
    ]
    assert len(made) == 4  # the call, its result, and two answers


async def test_a_rewind_forks_the_session_and_the_conversation_goes_on_there(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    model = ScriptedLlm(script=[says("one"), says("two"), says("three"), says("after")])
    runner = Runner(agent=agent_on(model), app_name=APP, session_service=service)
    session = await service.create_session(app_name=APP, user_id=ANN)
    invocations = [(await turn(runner, session.id, text))[-1].invocation_id for text in "abc"]
    await runner.rewind_async(
        user_id=ANN, session_id=session.id, rewind_before_invocation_id=invocations[1]
    )
    rewound = await session_of(service, session.id)
    assert [text_of(e) for e in rewound.events] == ["a", "one", ""]
    assert rewound.events[-1].actions.rewind_before_invocation_id == invocations[1]
    assert rewound.state == {"last_answer": "one"}
    await turn(runner, session.id, "d")
    assert [text_of(e) for e in (await session_of(service, session.id)).events][3:] == [
        "d",
        "after",
    ]
    # The rewound branch is a session of its own, the fork's parent.
    names = Names.of(APP, ANN, session.id)
    fork = await service.store_session_id(app_name=APP, user_id=ANN, session_id=session.id)
    assert fork == await ScopedStore(async_store, names.owner).head(names.base)
    assert fork != names.base
    [marker] = (await async_store.load_slice(fork, 3, 4)).entries  # after "a" and "one"
    assert isinstance(marker, MessageEntry)
    assert marker.message.text() == f"[rewind to before invocation {invocations[1]}]"
    headers = {meta.id: meta for meta in await async_store.list()}
    assert headers[fork].parent_session == names.base
    old = [text_of(e) for e in map(event_of, await async_store.load(names.base)) if e is not None]
    assert old == ["a", "one", "b", "two", "c", "three"]
    # Listed once, as it continues; deleted whole.
    [listed] = (await service.list_sessions(app_name=APP, user_id=ANN)).sessions
    assert listed.state["last_answer"] == "after"
    await service.delete_session(app_name=APP, user_id=ANN, session_id=session.id)
    assert await async_store.list() == []


def counted(task: str, n: int) -> Event:
    """The ``n``-th event of a run ``task``, setting its own key and the run's."""
    return Event(
        invocation_id=task,
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=f"{task} {n}")]),
        actions=EventActions(state_delta={f"{task}-{n}": n, task: n}),
    )


async def test_two_runs_appending_at_once_lose_nothing_and_never_go_stale(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    created = await service.create_session(app_name=APP, user_id=ANN)
    shared = await session_of(service, created.id)

    async def append(task: str, session: Session) -> None:
        for n in range(12):
            await service.append_event(session, counted(task, n))

    # Each run with a session object of its own, and two sharing one.
    own_a, own_b = await session_of(service, created.id), await session_of(service, created.id)
    await asyncio.gather(
        append("a", own_a), append("b", own_b), append("c", shared), append("d", shared)
    )
    stored = await session_of(service, created.id)
    texts = [text_of(e) for e in stored.events]
    assert len(texts) == 48
    for task in "abcd":
        assert [t for t in texts if t.startswith(task)] == [f"{task} {n}" for n in range(12)]
        assert stored.state[task] == 11
        assert all(stored.state[f"{task}-{n}"] == n for n in range(12))


@pytest.mark.parametrize("kind", PERSISTENT_KINDS)
async def test_services_on_two_stores_of_one_target_share_sessions_and_state(
    kind: str, store_targets: StoreTargets
) -> None:
    target = store_targets.new(kind)
    async with open_store(target) as one, open_store(target) as two:
        first, second = StoreSessionService(one), StoreSessionService(two)
        session = await first.create_session(
            app_name=APP, user_id=ANN, session_id="s", state={"app:n": 0}
        )
        theirs = await session_of(second, "s")

        async def bump(service: StoreSessionService, held: Session, key: str) -> None:
            for n in range(8):
                event = counted(key, n)
                event.actions.state_delta["app:" + key] = n
                await service.append_event(held, event)

        await asyncio.gather(bump(first, session, "x"), bump(second, theirs, "y"))
        for service in (first, second):
            stored = await session_of(service, "s")
            assert len(stored.events) == 16
            assert (stored.state["app:x"], stored.state["app:y"], stored.state["app:n"]) == (
                7,
                7,
                0,
            )


async def test_rewinds_to_the_first_invocation_and_again_inside_a_fork(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    model = ScriptedLlm(script=[says(word) for word in ("one", "two", "three", "four")])
    runner = Runner(agent=agent_on(model), app_name=APP, session_service=service)
    session = await service.create_session(app_name=APP, user_id=ANN)
    first = (await turn(runner, session.id, "a"))[-1].invocation_id
    second = (await turn(runner, session.id, "b"))[-1].invocation_id
    await runner.rewind_async(
        user_id=ANN, session_id=session.id, rewind_before_invocation_id=second
    )
    third = (await turn(runner, session.id, "c"))[-1].invocation_id
    await turn(runner, session.id, "d")
    # A second rewind, to an invocation of the fork, forks the fork.
    await runner.rewind_async(user_id=ANN, session_id=session.id, rewind_before_invocation_id=third)
    assert [text_of(e) for e in (await session_of(service, session.id)).events] == [
        "a",
        "one",
        "",
        "",
    ]
    # Before the first invocation: nothing of the conversation is left.
    await runner.rewind_async(user_id=ANN, session_id=session.id, rewind_before_invocation_id=first)
    emptied = await session_of(service, session.id)
    assert [e.actions.rewind_before_invocation_id for e in emptied.events] == [first]
    assert emptied.state == {"last_answer": None}
    names = Names.of(APP, ANN, session.id)
    history = await ScopedStore(async_store, names.owner).head_history(names.base)
    assert len({move.session_id for move in history}) == 4
    await service.delete_session(app_name=APP, user_id=ANN, session_id=session.id)
    assert await async_store.list() == []


@pytest.mark.parametrize("kind", SEALED_KINDS)
async def test_a_sealed_store_keeps_adk_sessions_as_a_plain_one_does(
    kind: str, store_targets: StoreTargets
) -> None:
    async with open_store(store_targets.new(kind), **store_targets.options(kind)) as store:
        service = StoreSessionService(store)
        model = ScriptedLlm(
            script=[calls("weather", "call-1", city="Oslo"), says("Cold."), says("Ok.")]
        )
        runner = Runner(agent=agent_on(model), app_name=APP, session_service=service)
        session = await service.create_session(app_name=APP, user_id=ANN, state={"user:u": 1})
        made = await turn(runner, session.id, "Weather in Oslo?")
        await turn(runner, session.id, "Thanks")
        await runner.rewind_async(
            user_id=ANN, session_id=session.id, rewind_before_invocation_id=made[-1].invocation_id
        )
        again = await session_of(service, session.id)
        assert [text_of(e) for e in again.events] == [""]
        assert again.state["user:u"] == 1
        assert await store.search("Oslo")
        await service.delete_session(app_name=APP, user_id=ANN, session_id=session.id)
        assert await store.list() == []


async def test_two_runners_on_one_session_at_once_both_finish_their_turns(
    async_store: SessionStore,
) -> None:
    service = StoreSessionService(async_store)
    session = await service.create_session(app_name=APP, user_id=ANN)
    runners = [
        Runner(
            agent=agent_on(
                ScriptedLlm(script=[calls("weather", f"call-{n}", city=city), says(city)])
            ),
            app_name=APP,
            session_service=service,
        )
        for n, city in enumerate(["Rome", "Oslo"])
    ]
    made = await asyncio.gather(
        turn(runners[0], session.id, "Weather in Rome?"),
        turn(runners[1], session.id, "Weather in Oslo?"),
    )
    assert [len(events) for events in made] == [3, 3]
    stored = await session_of(service, session.id)
    texts = [text_of(e) for e in stored.events]
    for city in ("Rome", "Oslo"):
        assert texts.index(f"Weather in {city}?") < texts.index(city)
    assert len(stored.events) == 8  # each turn's question, call, result and answer
    assert stored.state["last_answer"] in ("Rome", "Oslo")
