"""pydantic-ai: a long-lived agent's turn through `MessageHistories` (`load`,
then `save`) on a SQLite store, against pydantic-ai's own ``ConversationStore`` where the installed
version has one. Its only backend is ``InMemoryConversationStore``: in
memory, not durable, its ``load`` copying every entry; so that row is for
reference, and the target is our turn's flatness."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from messages import text
from results import Table, aper_call_within

from sessionstore import SessionMeta, SqlStore

from .base import BATCH, NAME, Plan, Templates, turns_at_most

if TYPE_CHECKING:
    from pydantic_ai.conversation_store import ConversationStore
    from pydantic_ai.messages import ModelMessage

    from sessionstore.integrations.pydantic_ai import MessageHistories


def exchange(n: int) -> list[ModelMessage]:
    """A user's prompt and the model's answer, as a run's ``new_messages()``."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    return [
        ModelRequest(parts=[UserPromptPart(content=text(n))]),
        ModelResponse(parts=[TextPart(content=text(n + 1))]),
    ]


def model_messages(count: int) -> list[ModelMessage]:
    return [message for n in range(0, count, 2) for message in exchange(n)]


async def fill(path: Path, size: int) -> None:
    from sessionstore.integrations.pydantic_ai import save_messages

    messages = model_messages(size)
    async with await SqlStore.open(str(path)) as store:
        await store.create(SessionMeta(id=NAME))
        for start in range(0, size, BATCH):
            await save_messages(store, NAME, messages[start : start + BATCH])


async def our_turn(histories: MessageHistories, numbers: Iterator[int]) -> None:
    """A long-lived agent's turn: `MessageHistories` kept from turn to turn."""
    await histories.load(NAME)
    await histories.save(NAME, exchange(next(numbers)))


async def their_turn(store: ConversationStore, numbers: Iterator[int]) -> None:
    conversation = await store.load(NAME)
    assert conversation is not None
    conversation.messages.extend(exchange(next(numbers)))
    await store.save(conversation)


async def pydantic_ai(
    work: Path, templates: Templates, plan: Plan, table: Table
) -> dict[int, list[float]]:
    """Our turns at each size (returned), and, in ``table``, the same against
    ``InMemoryConversationStore`` when pydantic-ai has it."""
    from sessionstore.integrations.pydantic_ai import MessageHistories

    try:
        from pydantic_ai.conversation import Conversation
        from pydantic_ai.conversation_store import InMemoryConversationStore
    except ImportError:  # a pydantic-ai older than its ConversationStore
        compared = False
    else:
        compared = True
    ours: dict[int, list[float]] = {}
    copies = itertools.count()
    for size in plan.turns:
        mine, their = [], []
        for _ in range(plan.rounds):
            # Each round on a new copy: each starts at ``size`` messages.
            target = work / f"pydantic-ai-{next(copies)}.db"
            path = await templates.copy("pydantic-ai", size, fill, target)
            async with await SqlStore.open(str(path)) as store:
                histories = MessageHistories(store)
                await our_turn(histories, itertools.count(10_000_000, 2))  # the turn before
                call = partial(our_turn, histories, itertools.count(20_000_000, 2))
                mine.append(await aper_call_within(call, plan.turn_budget, turns_at_most(size)))
            if compared:
                # Not warmed by a turn before: this store keeps nothing between
                # calls (each load copies every entry), and its fill paid the
                # one-time costs (pydantic's schemas).
                memory = InMemoryConversationStore()
                messages = model_messages(size)
                await memory.save(Conversation(conversation_id=NAME, messages=messages))
                call = partial(their_turn, memory, itertools.count(20_000_000, 2))
                their.append(await aper_call_within(call, plan.turn_budget, turns_at_most(size)))
        ours[size] = mine
        if compared:
            name = f"a turn: load, then save a request and a response, {size:,} messages"
            table.add(name, mine, their)
    return ours
