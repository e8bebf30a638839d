"""What a session made from a target costs, against one made on an open store.

    python scripts/session_per_object.py [ROUNDS]

``StoreSession("chat-1", "conv.db")`` and
``SessionStoreChatMessageHistory(session_id="chat-1", connection="conv.db")``
open a store of their own on first use and close it at ``close()``. This
times, on a SQLite file holding a 20-message conversation, a first read
through such an object (its open included) and its close, against the same
read through an object made on a store opened once, and openai-agents' own
``SQLiteSession`` made, read and closed; and counts the threads one such
object keeps while it is open. Medians of ROUNDS (default 30).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from langchain_core.messages import HumanMessage

from sessionstore import open_store
from sessionstore.integrations.langchain import SessionStoreChatMessageHistory
from sessionstore.integrations.openai_agents import StoreSession
from sessionstore.sync import open_store as open_sync_store

MESSAGES = 20


def median_ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:7.2f} ms"


def threads_of_ours() -> int:
    return sum(thread.name.startswith("sessionstore-") for thread in threading.enumerate())


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def agents(target: str, rounds: int) -> None:
    first = StoreSession("chat-1", target)
    items = [{"role": "user", "content": f"message {n}"} for n in range(MESSAGES)]
    asyncio.run(first.add_items(items))  # type: ignore[arg-type]
    first.close()
    reads, closes, threads = [], [], 0
    for _ in range(rounds):
        session = StoreSession("chat-1", target)
        reads.append(timed(partial(asyncio.run, session.get_items())))
        threads = threads_of_ours()
        closes.append(timed(session.close))
    shared = []

    async def on_one_store() -> None:
        async with open_store(target) as store:
            for _ in range(rounds):
                started = time.perf_counter()
                await StoreSession(store, "chat-1").get_items()
                shared.append(time.perf_counter() - started)

    asyncio.run(on_one_store())
    peer = []
    peer_target = str(Path(target).with_name("peer.db"))
    asyncio.run(_close_peer(SQLiteSession("chat-1", peer_target), items))
    for _ in range(rounds):
        started = time.perf_counter()
        asyncio.run(_close_peer(SQLiteSession("chat-1", peer_target)))
        peer.append(time.perf_counter() - started)
    print("openai-agents StoreSession, 20 items:")
    print(f"  StoreSession('chat-1', 'conv.db'): first get_items {median_ms(reads)}, "
          f"close {median_ms(closes)}, {threads} threads while open")  # fmt: skip
    print(f"  StoreSession(store, 'chat-1') on one open store: get_items {median_ms(shared)}")
    print(f"  openai-agents' SQLiteSession('chat-1', 'peer.db'): made, first get_items and "
          f"closed {median_ms(peer)}")  # fmt: skip


async def _close_peer(session: SQLiteSession, items: list[Any] | None = None) -> None:
    if items:
        await session.add_items(items)
    await session.get_items()
    session.close()


def langchain(target: str, rounds: int) -> None:
    first = SessionStoreChatMessageHistory(session_id="chat-2", connection=target)
    first.add_messages([HumanMessage(f"message {n}") for n in range(MESSAGES)])
    first.close()
    reads, closes, threads = [], [], 0
    for _ in range(rounds):
        history = SessionStoreChatMessageHistory(session_id="chat-2", connection=target)
        reads.append(timed(partial(getattr, history, "messages")))
        threads = threads_of_ours()
        closes.append(timed(history.close))
    shared = []
    with open_sync_store(target) as store:
        for _ in range(rounds):
            shared.append(timed(lambda: SessionStoreChatMessageHistory(store, "chat-2").messages))
    print("LangChain SessionStoreChatMessageHistory, 20 messages:")
    print(f"  (session_id='chat-2', connection='conv.db'): first .messages {median_ms(reads)}, "
          f"close {median_ms(closes)}, {threads} threads while open")  # fmt: skip
    print(f"  (store, 'chat-2') on one open store: .messages {median_ms(shared)}")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    with tempfile.TemporaryDirectory() as directory:
        target = str(Path(directory) / "conv.db")
        agents(target, rounds)
        langchain(target, rounds)


if __name__ == "__main__":
    main()
