"""Reading a `StoreSaver`'s checkpoints: a tuple from its keyed lines and its session.

A checkpoint is one keyed lookup, its channels' values one more, its
pending writes a scan of its prefix: a read costs what it returns.
"""

from __future__ import annotations

import builtins
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.constants import START

import sessionstore.integrations.langgraph_records as records
from sessionstore import InvalidRecordError, SessionJournal, SessionStore, SessionStoreError
from sessionstore.integrations.langgraph_messages import Messages
from sessionstore.integrations.langgraph_records import ns_of, thread_of
from sessionstore.integrations.langgraph_threads import named

__all__ = ["Reader"]


class Reader:
    """Reads checkpoints whose messages channel ``channel`` is kept by ``messages``."""

    def __init__(self, messages: Messages, channel: str) -> None:
        self._messages = messages
        self._channel = channel

    async def get(
        self, serde: SerializerProtocol, config: RunnableConfig, store: SessionStore
    ) -> CheckpointTuple | None:
        thread, ns = thread_of(config), ns_of(config)
        journal = records.journal_of(store, thread)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            key = records.checkpoint_key(ns, checkpoint_id)
            lines = (await journal.keyed(key)).get(key)
        else:
            latest = await journal.scan(records.checkpoint_prefix(ns), limit=1)
            if not latest:
                return None
            key, lines = latest[0]
        if not lines:
            return None
        return await self._tuple(
            store, serde, journal, thread, records.checkpoint_of(key, lines[-1], thread)
        )

    async def list(
        self,
        serde: SerializerProtocol,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
        store: SessionStore,
    ) -> builtins.list[CheckpointTuple]:
        if config is None:
            names = await store.journals()
            prefix = records.JOURNAL_PREFIX
            threads = sorted(name[len(prefix) :] for name in names if name.startswith(prefix))
            ns: str | None = None
            only = None
        else:
            threads, ns = [thread_of(config)], config["configurable"].get("checkpoint_ns")
            only = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before is not None else None
        found: builtins.list[CheckpointTuple] = []
        for thread in threads:
            if limit is not None and len(found) >= limit:
                break
            journal = records.journal_of(store, thread)
            bound = (
                None if before_id is None or ns is None else records.checkpoint_key(ns, before_id)
            )
            cut = None if filter or limit is None else limit - len(found)
            if only and ns is not None:  # one checkpoint: looked up by its key
                key = records.checkpoint_key(ns, only)
                scanned = builtins.list((await journal.keyed(key)).items())
            else:
                scanned = await journal.scan(records.checkpoint_prefix(ns), before=bound, limit=cut)
            for key, lines in scanned:
                if limit is not None and len(found) >= limit:
                    return found
                record = records.checkpoint_of(key, lines[-1], thread)
                if (only and record["id"] != only) or (before_id and record["id"] >= before_id):
                    continue
                if filter:
                    metadata = _loads(serde, record["metadata"], thread)
                    if any(metadata.get(k) != v for k, v in filter.items()):
                        continue
                found.append(await self._tuple(store, serde, journal, thread, record))
        return found[:limit] if limit is not None else found

    async def _tuple(
        self,
        store: SessionStore,
        serde: SerializerProtocol,
        journal: SessionJournal,
        thread: str,
        record: dict[str, Any],
    ) -> CheckpointTuple:
        try:
            return await self._read_tuple(store, serde, journal, thread, record)
        except SessionStoreError as exc:
            raise named(exc, f"thread {thread!r}, checkpoint {record['id']!r}") from exc

    async def _read_tuple(
        self,
        store: SessionStore,
        serde: SerializerProtocol,
        journal: SessionJournal,
        thread: str,
        record: dict[str, Any],
    ) -> CheckpointTuple:
        ns, checkpoint_id = record["ns"], record["id"]
        versions: dict[str, Any] = record["versions"]
        position = records.position_of(record)
        channel = self._channel if position is not None else None
        wanted = {
            records.blob_key(ns, name, version): name
            for name, version in versions.items()
            if name != channel
        }
        blobs = await journal.keyed(*wanted) if wanted else {}
        values: dict[str, Any] = {}
        for key, name in wanted.items():
            if key in blobs:
                values[name] = _loads_member(serde, records.decode(blobs[key][-1], thread), key)
        if position is not None:
            values[self._channel] = await self._messages.read(
                store, thread, ns, checkpoint_id, position
            )
        writes = []
        for key, lines in await journal.scan(records.write_prefix(ns, checkpoint_id)):
            write = records.decode(lines[0] if records.regular(key) else lines[-1], key)
            task, index = records.write_parts(key)
            order = (write["path"], task, index)
            if "of" in write:  # a member of the checkpoint's input, read anew from its line
                given = records.blob_key(ns, START, versions.get(START))
                if given not in blobs:
                    raise InvalidRecordError(f"{key}: a member of the input, and no input stored")
                held = _loads_member(serde, records.decode(blobs[given][-1], thread), given)
                if not isinstance(held, dict) or write["of"] not in held:
                    raise InvalidRecordError(f"{key}: a member the input does not hold")
                value = held[write["of"]]
            else:
                value = _loads_member(serde, write, key)
            writes.append((order, (task, write["channel"], value)))
        writes.sort(key=lambda each: each[0])
        configurable = {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        parent = record.get("parent")
        checkpoint: Any = {
            **(
                {"updated_channels": record["updated"]}
                if "updated" in record
                else _loads(serde, record["rest"], thread)
            ),
            "v": record["v"],
            "id": checkpoint_id,
            "ts": record["ts"],
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": record["seen"],
        }
        return CheckpointTuple(
            config={"configurable": configurable},
            checkpoint=checkpoint,
            metadata=_loads(serde, record["metadata"], thread),
            parent_config=(
                {"configurable": {**configurable, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=[write for _, write in writes],
        )


def _loads_member(serde: SerializerProtocol, record: dict[str, Any], where: str) -> Any:
    """The ``value`` of a blob or write line, loaded (left out: `records.NULL`)."""
    if "value" not in record:
        return serde.loads_typed(records.NULL)
    return _loads(serde, record["value"], where)


def _loads(serde: SerializerProtocol, value: Any, where: str) -> Any:
    return serde.loads_typed(records.typed_of(value, where))
