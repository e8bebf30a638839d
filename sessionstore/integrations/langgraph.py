"""LangGraph checkpoints kept in a session store: `StoreSaver`.

A LangGraph checkpointer (``BaseCheckpointSaver``) over any store::

    saver = StoreSaver(open_store("sessions.db"))
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "chat-42"}})

A thread's messages channel is the conversation ``chat-42``, each message
once, as the LangChain adapter stores it
(`sessionstore.integrations.langgraph_messages`); everything else is keyed
lines of its journal ``langgraph:chat-42``
(`sessionstore.integrations.langgraph_records`). docs/integrations.md
(LangGraph) tells the layout, retention and costs.
"""

from __future__ import annotations

import builtins
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.langgraph needs langgraph ({exc}): "
        "pip install 'sessionstore[langgraph]'"
    ) from exc

import sessionstore.integrations.langgraph_threads as threads
from sessionstore import SessionStore
from sessionstore.integrations.langgraph_messages import Messages
from sessionstore.integrations.langgraph_reads import Reader
from sessionstore.integrations.langgraph_writes import Writer
from sessionstore.integrations.owned import blocking, on_store
from sessionstore.sync import SyncStore

__all__ = ["StoreSaver"]

_T = TypeVar("_T")


class StoreSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer keeping each thread in a session store.

    Args:
        store: a `sessionstore.sync.SyncStore` (every method works) or an
            async `SessionStore` (only the async methods work); the caller
            keeps it open.
        serde: how channel values, writes and metadata are serialized, as
            LangGraph's savers take it (default: its ``JsonPlusSerializer``;
            an ``EncryptedSerializer`` works too: it seals what the journal
            keeps, not the messages of the session, which a sealed store
            seals, docs/encryption.md).
        messages_channel: the channel kept as the session's entries, when
            it holds a list of LangChain messages.
    """

    def __init__(
        self,
        store: SessionStore | SyncStore,
        *,
        serde: SerializerProtocol | None = None,
        messages_channel: str = "messages",
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.messages_channel = messages_channel
        self._messages = Messages()
        self._reader = Reader(self._messages, messages_channel)
        self._writer = Writer(self._messages, messages_channel)

    def __repr__(self) -> str:
        return f"StoreSaver({self.store!r})"

    def drop_caches(self) -> None:
        """Forget the messages this saver keeps converted between calls."""
        self._messages.drop()

    @property
    def kept_messages(self) -> int:
        """The messages kept listed for the latest checkpoint of each thread served."""
        return self._messages.held

    def get_next_version(self, current: Any, channel: None) -> Any:
        """A version above ``current``: the step's number times 2**32 plus a
        random 32-bit part (two branches never make one version twice); above
        a string version (``"<number>.<hex>"``, LangGraph's savers'), a string
        of that form, so the thread's versions still compare."""
        if isinstance(current, str):
            number = int(current.split(".")[0])
            return f"{number + 1:010}.{random.getrandbits(32):08x}"
        step = 0 if current is None else int(current) >> 32
        return ((step + 1) << 32) | random.getrandbits(32)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._await(self._reader.get, self.serde, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for each in await self._await(self._reader.list, self.serde, config, filter, before, limit):
            yield each

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, child of the one ``config`` names.

        Raises:
            InvalidRecordError: a value cannot be serialized, or is too large;
                nothing is stored. Any store error names the thread and checkpoint.
        """
        put = self._writer.put
        return await self._await(put, self.serde, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        put = self._writer.put_writes
        await self._await(put, self.serde, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Erase a thread: its sessions and its journal, recorded as erasures."""
        await self._await(threads.delete, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Erase the checkpoints the runs wrote, and what no other checkpoint needs."""
        await self._await(threads.delete_runs, builtins.list(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's checkpoints and writes to another: its sessions are forked."""
        await self._await(threads.copy, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: erase every checkpoint but each namespace's latest,
        and what it does not need; ``delete``: erase the threads."""
        await self._await(threads.prune, builtins.list(thread_ids), strategy)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run("get_tuple", self._reader.get, self.serde, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._run("list", self._reader.list, self.serde, config, filter, before, limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        put = self._writer.put
        return self._run("put", put, self.serde, config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        put = self._writer.put_writes
        self._run("put_writes", put, self.serde, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._run("delete_thread", threads.delete, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run("delete_for_runs", threads.delete_runs, builtins.list(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run("copy_thread", threads.copy, source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run("prune", threads.prune, builtins.list(thread_ids), strategy)

    # What the methods and their blocking twins run take the store last:
    # `_await` and `_run` give it.

    async def _await(self, call: Callable[..., Awaitable[_T]], *arguments: Any) -> _T:
        return await on_store(self.store, partial(call, *arguments))

    def _run(self, method: str, call: Callable[..., Awaitable[_T]], *arguments: Any) -> _T:
        store = blocking(
            self.store,
            f"StoreSaver.{method}",
            "saver",
            "use the graph's async methods (ainvoke, astream), or build the saver",
        )
        return store.run(partial(call, *arguments))
