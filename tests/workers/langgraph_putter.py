"""A separate process driving one LangGraph thread through `StoreSaver`, for
the concurrency test (tests/integrations/test_langgraph_saver.py).

Usage: python langgraph_putter.py TARGET THREAD WORKER COUNT

Each step reads the thread's latest checkpoint and puts a child of it whose
messages are its parent's and two of the step's own (``WORKER:N`` and its
answer), as a graph's super-step does. After each put returns, the worker
prints the checkpoint's id on its own line and flushes: the ones it was told
are stored.
"""

import asyncio
import sys
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6

from sessionstore import open_store
from sessionstore.integrations.langgraph import StoreSaver


async def main(target: str, thread: str, worker: str, count: int) -> None:
    async with open_store(target) as store:
        saver = StoreSaver(store)
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for n in range(count):
            latest = await saver.aget_tuple(config)
            parent = latest.config if latest is not None else config
            said = latest.checkpoint["channel_values"]["messages"] if latest is not None else []
            step: list[BaseMessage] = [
                HumanMessage(f"{worker}:{n}", id=f"{worker}-{n}-q"),
                AIMessage(f"answer {worker}:{n}", id=f"{worker}-{n}-a"),
            ]
            version = saver.get_next_version(None if latest is None else n, None)
            checkpoint = Checkpoint(
                v=1,
                id=str(uuid6()),
                ts=datetime.now(UTC).isoformat(),
                channel_values={"messages": [*said, *step]},
                channel_versions={"messages": version},
                versions_seen={},
                updated_channels=None,
            )
            stored = await saver.aput(parent, checkpoint, {}, {"messages": version})
            print(stored["configurable"]["checkpoint_id"], flush=True)


if __name__ == "__main__":
    target, thread, worker, count = sys.argv[1:5]
    asyncio.run(main(target, thread, worker, int(count)))
