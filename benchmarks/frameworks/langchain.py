"""LangChain, sync: `SessionStoreChatMessageHistory` on a `SyncStore` against
``SQLChatMessageHistory`` on a sync engine, each history on a SQLite file
of its own (theirs has no index on its session column: sharing a file with
other conversations would cost it a scan of theirs too)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from messages import text
from results import Table, per_call_within

from .base import BATCH, NAME, READS, Figures, Fill, Plan, Templates, turns_at_most

if TYPE_CHECKING:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage

Chat = Callable[[Path], AbstractContextManager["BaseChatMessageHistory"]]


def chat_messages(start: int, count: int) -> list[BaseMessage]:
    """Messages ``start`` on: a human's when even, an AI's when odd."""
    from langchain_core.messages import AIMessage, HumanMessage

    made: list[BaseMessage] = []
    for n in range(start, start + count):
        made.append(AIMessage(content=text(n)) if n % 2 else HumanMessage(content=text(n)))
    return made


class _PerCall:
    """A history asked of a `ChatHistories` at every call, as
    ``RunnableWithMessageHistory`` asks its ``get_session_history``."""

    def __init__(self, histories: Callable[[str], BaseChatMessageHistory]) -> None:
        self._histories = histories

    @property
    def messages(self) -> list[BaseMessage]:
        return self._histories(NAME).messages

    def add_messages(self, messages: list[BaseMessage]) -> None:
        self._histories(NAME).add_messages(messages)


@contextmanager
def ours(path: Path) -> Iterator[BaseChatMessageHistory]:
    """Our histories on a `SyncStore`, made by `ChatHistories` at each call
    as ``RunnableWithMessageHistory`` asks for them."""
    from sessionstore.integrations.langchain import ChatHistories
    from sessionstore.sync import open_store

    with open_store(str(path)) as store:
        yield _PerCall(ChatHistories(store))  # type: ignore[misc]


@contextmanager
def theirs(path: Path) -> Iterator[BaseChatMessageHistory]:
    """LangChain's ``SQLChatMessageHistory`` (WAL, synchronous=NORMAL)."""
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from sqlalchemy import create_engine, event

    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", _pragmas)
    try:
        yield SQLChatMessageHistory(NAME, connection=engine)
    finally:
        engine.dispose()


def _pragmas(connection: Any, record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def filling(chat: Chat) -> Fill:
    async def fill(path: Path, size: int) -> None:
        with chat(path) as history:
            for start in range(0, size, BATCH):
                history.add_messages(chat_messages(start, min(BATCH, size - start)))

    return fill


def read(history: BaseChatMessageHistory) -> object:
    return history.messages


def turn(history: BaseChatMessageHistory, numbers: Iterator[int]) -> None:
    """A turn of a sync chain: the history read, then the exchange added."""
    read(history)
    history.add_messages(chat_messages(next(numbers), 2))


async def langchain(
    work: Path, templates: Templates, plan: Plan, table: Table
) -> dict[int, Figures]:
    """The LangChain rows, in ``table``; returns the turns' figures at each size."""
    copies = itertools.count()
    sides: dict[str, Chat] = {"ours": ours, "theirs": theirs}

    async def copy(side: str, size: int) -> Path:
        target = work / f"langchain-{side}-{next(copies)}.db"
        return await templates.copy(f"langchain-{side}", size, filling(sides[side]), target)

    reads: dict[int, Figures] = {}
    turns: dict[int, Figures] = {}
    for size in plan.chats:
        with ours(await copy("ours", size)) as mine, theirs(await copy("theirs", size)) as their:
            read(mine), read(their)
            reads[size] = [], []
            for _ in range(plan.rounds):
                reads[size][0].append(per_call_within(partial(read, mine), plan.budget, READS))
                reads[size][1].append(per_call_within(partial(read, their), plan.budget, READS))
        # Each round of turns on new copies: each starts at ``size`` messages,
        # after a turn before (the first write after opening a store, with
        # its one-time work, is not a turn's cost; at 100 messages a round
        # is 5 turns).
        turns[size] = [], []
        for _ in range(plan.rounds):
            for (side, chat), times in zip(sides.items(), turns[size], strict=True):
                with chat(await copy(side, size)) as history:
                    turn(history, itertools.count(5_000_000, 2))  # the turn before
                    call = partial(turn, history, itertools.count(10_000_000, 2))
                    times.append(per_call_within(call, plan.turn_budget, turns_at_most(size)))
    for size, figures in reads.items():
        table.add(f".messages, {size:,} messages (target ≤0.2x)", *figures)
    for size, figures in turns.items():
        name = f"a turn: .messages, then add_messages([human, ai]), {size:,} messages"
        table.add(f"{name} (target ≤0.2x)", *figures)
    return turns
