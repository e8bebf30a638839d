"""The keyed journal lines `StoreSaver` keeps a LangGraph thread in (docs/wire-format.md).

A thread's journal (`journal_name`) holds, as keyed lines (a JSON object
whose member ``key`` is a string, `sessionstore.wire.line_key`):

* ``c/<ns>/<checkpoint>``: a checkpoint, without its channel values: its
  parent, time, channel versions, versions seen, metadata, and where the
  messages channel stands in the thread's session (`Position`);
* ``b/<ns>/<channel>/<version>``: a channel's value at a version, written
  by the checkpoint that made the version and read by every later one that
  still has it;
* ``w/<ns>/<checkpoint>/<task>/<index>``: a pending write;
* ``s/<ns>/<session>``: a session the thread made (its first one, a fork),
  so that deleting the thread erases it.

The store-wide journal `RUNS` holds ``r/<run>/<thread>`` for each run that
wrote a checkpoint of a thread (what ``delete_for_runs`` finds threads by).
Key parts are escaped (``%`` and ``/``), so a prefix is one namespace's or
one checkpoint's; checkpoint ids sort by time, so a namespace's keys in
descending order are its checkpoints newest first.

Values a serializer made (``serde.dumps_typed``: a type and bytes) are kept
as ``[type, base64]``. This module only builds and reads these objects; the
JSON is `sessionstore.wire`'s.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sessionstore import (
    InvalidRecordError,
    InvalidSessionIdError,
    SessionJournal,
    SessionStore,
    validate_session_id,
)
from sessionstore.wire import decode_value, encode_value

__all__ = [
    "CHECKPOINT_FORMAT",
    "JOURNAL_PREFIX",
    "NULL",
    "RUNS",
    "UNCOMPRESSED_MAX",
    "Position",
    "Typed",
    "blob_key",
    "checkpoint_key",
    "checkpoint_line",
    "checkpoint_of",
    "checkpoint_prefix",
    "conversation_name",
    "decode",
    "encode",
    "journal_name",
    "journal_of",
    "marked",
    "ns_of",
    "regular",
    "run_key",
    "run_prefix",
    "runs_of",
    "session_key",
    "session_mark",
    "thread_of",
    "ts_value",
    "typed_of",
    "typed_value",
    "write_key",
    "write_parts",
    "write_prefix",
]

JOURNAL_PREFIX = "langgraph:"
"""A thread's journal is ``langgraph:<thread>``."""

RUNS = "langgraph"
"""The store-wide journal of which runs wrote to which threads."""

Typed = tuple[str, bytes]
"""What ``serde.dumps_typed`` makes."""

NULL: Typed = ("null", b"")
"""What LangGraph's serializers make of None: a line leaves its ``value`` out."""


def _part(text: str) -> str:
    return text.replace("%", "%25").replace("/", "%2F")


def _unpart(text: str) -> str:
    return text.replace("%2F", "/").replace("%25", "%")


def checkpoint_prefix(ns: str | None) -> str:
    """The keys of a namespace's checkpoints (None: every namespace's)."""
    return "c/" if ns is None else f"c/{_part(ns)}/"


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    return f"c/{_part(ns)}/{_part(checkpoint_id)}"


def blob_key(ns: str, channel: str, version: Any) -> str:
    return f"b/{_part(ns)}/{_part(channel)}/{_part(str(version))}"


def _id_part(text: str) -> str:
    """An id as a write's key holds it: a UUID (as LangGraph's checkpoint and
    task ids are) in 22 characters, ``~`` and the base64url of its 16 bytes;
    anything else escaped, a leading ``~`` too."""
    if len(text) == 36:
        try:
            parsed = uuid.UUID(text)
        except ValueError:
            parsed = None
        if parsed is not None and str(parsed) == text:
            return "~" + base64.urlsafe_b64encode(parsed.bytes).decode("ascii").rstrip("=")
    escaped = _part(text)
    return "%7E" + escaped[1:] if escaped.startswith("~") else escaped


def _id_of(part: str) -> str:
    """`_id_part` back.

    Raises:
        ValueError: it is not one.
    """
    if part.startswith("~"):
        if len(part) != 23:
            raise ValueError(part)
        return str(uuid.UUID(bytes=base64.urlsafe_b64decode(part[1:] + "==")))
    return _unpart(part.replace("%7E", "~", 1) if part.startswith("%7E") else part)


def write_prefix(ns: str, checkpoint_id: str) -> str:
    """The keys of a checkpoint's pending writes."""
    return f"w/{_part(ns)}/{_id_part(checkpoint_id)}/"


def write_key(ns: str, checkpoint_id: str, task_id: str, index: int) -> str:
    return f"{write_prefix(ns, checkpoint_id)}{_id_part(task_id)}/{index}"


def write_parts(key: str) -> tuple[str, int]:
    """The task and index a `write_key` names.

    Raises:
        InvalidRecordError: it is not a write's key.
    """
    parts = key.split("/")
    try:
        if len(parts) != 5 or parts[0] != "w":
            raise ValueError(key)
        return _id_of(parts[3]), int(parts[4])
    except (ValueError, binascii.Error):
        raise InvalidRecordError(f"{key}: not a pending write's key") from None


def session_key(ns: str, session_id: str) -> str:
    return f"s/{_part(ns)}/{session_id}"


def run_prefix(run_id: str) -> str:
    return f"r/{_part(run_id)}/"


def run_key(run_id: str, thread_id: str) -> str:
    return f"{run_prefix(run_id)}{_part(thread_id)}"


def thread_of_run_key(key: str) -> str:
    """The thread a `run_key` names."""
    return _unpart(key.rsplit("/", 1)[1])


def journal_name(thread_id: Any) -> str:
    """The journal of ``thread_id``.

    Raises:
        InvalidSessionIdError: the thread id is no string, or makes no valid
            journal name (a ``/``, a control character, too long).
    """
    if not isinstance(thread_id, str):
        raise InvalidSessionIdError(repr(thread_id), "a thread_id is a string")
    try:
        return validate_session_id(JOURNAL_PREFIX + thread_id)
    except InvalidSessionIdError as exc:
        raise InvalidSessionIdError(thread_id, f"cannot name a thread: {exc.reason}") from None


def journal_of(store: SessionStore, thread_id: str) -> SessionJournal:
    """The journal of ``thread_id`` in ``store``, its appends as durable as
    the store's (``durability="store"``): a checkpoint needs no more than the
    messages it points to."""
    return store.journal(journal_name(thread_id), durability="store")


def runs_of(store: SessionStore) -> SessionJournal:
    """The journal `RUNS` in ``store``, as durable as the store's appends."""
    return store.journal(RUNS, durability="store")


def thread_of(config: Any) -> str:
    """A config's ``thread_id``, checked to name a journal (`journal_name`)."""
    thread = config["configurable"]["thread_id"]
    journal_name(thread)
    return str(thread)


def ns_of(config: Any) -> str:
    """A config's ``checkpoint_ns`` ("" when it has none).

    Raises:
        InvalidRecordError: it is not a string.
    """
    ns = config["configurable"].get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise InvalidRecordError(f"checkpoint_ns {ns!r} is not a string")
    return ns


def regular(key: str) -> bool:
    """Whether a write's key is a regular write's (index 0 or more), not a
    special one's (an error, an interrupt: below 0)."""
    return not key.rsplit("/", 1)[1].startswith("-")


def conversation_name(thread_id: str, ns: str) -> str | None:
    """The conversation (head, and first session id) of a thread's namespace:
    the thread id itself for the root namespace, so ``sessionstore show
    <thread_id>`` shows it; ``<thread_id>|<ns>`` for a subgraph's, or
    ``<thread_id>|#<digest of ns>`` when that breaks the session-id rule (too
    long); None when even that does (the sessions then have fresh ids, and
    no head names them)."""
    if not ns:
        return thread_id
    for name in (
        f"{thread_id}|{ns}",
        f"{thread_id}|#{hashlib.sha256(ns.encode()).hexdigest()[:32]}",
    ):
        try:
            return validate_session_id(name)
        except InvalidSessionIdError:
            continue
    return None


def session_mark(thread_id: str, ns: str) -> dict[str, Any]:
    """The header metadata of the sessions a thread makes: whose they are."""
    return {"langgraph": {"thread": thread_id, "ns": ns}}


def marked(metadata: dict[str, Any], thread_id: str) -> bool:
    """Whether a session's header metadata is `session_mark`'s for the thread."""
    mark = metadata.get("langgraph")
    return isinstance(mark, dict) and mark.get("thread") == thread_id


@dataclass(frozen=True)
class Position:
    """Where the messages channel stands: the first ``count`` messages of
    ``session``, the last of them in the entry ``last`` ("" when there are
    none; ``session`` is None only then)."""

    session: str | None
    count: int
    last: str


_SQUEEZE = 128
"""Bytes from which a serialized value is kept compressed, if that saves a
quarter of it (a serializer's output repeats its field and class names)."""

UNCOMPRESSED_MAX = 2**30
"""The most a compressed value may give back: a line cannot hold more."""


def typed_value(typed: Typed) -> list[str]:
    """A serializer's output as a line holds it: ``[type, base64]``, or
    ``[type, base64 of the zlib stream, "zlib"]`` when that is a quarter shorter."""
    kind, data = typed
    if len(data) >= _SQUEEZE:
        squeezed = zlib.compress(data)
        if len(squeezed) * 4 <= len(data) * 3:
            return [kind, base64.b64encode(squeezed).decode("ascii"), "zlib"]
    return [kind, base64.b64encode(data).decode("ascii")]


def typed_of(value: Any, where: str) -> Typed:
    """`typed_value` back.

    Raises:
        InvalidRecordError: ``value`` is not one (``where`` names it).
    """
    if (
        isinstance(value, list)
        and len(value) in (2, 3)
        and isinstance(value[0], str)
        and isinstance(value[1], str)
        and (len(value) == 2 or value[2] == "zlib")
    ):
        try:
            data = base64.b64decode(value[1], validate=True)
            if len(value) == 3:
                opened = zlib.decompressobj()
                data = opened.decompress(data, UNCOMPRESSED_MAX)
                if opened.unconsumed_tail or not opened.eof:
                    raise ValueError("not a whole zlib stream, or too long")
            return value[0], data
        except (binascii.Error, ValueError, zlib.error):
            pass
    raise InvalidRecordError(f"{where}: not a [type, base64] or [type, base64, zlib] value")


def encode(record: dict[str, Any]) -> bytes:
    """A keyed line (``record`` has ``key`` first), as the journal stores it.

    Raises:
        InvalidRecordError: the record holds what JSON cannot carry.
    """
    return encode_value(record).encode("utf-8")


def decode(line: bytes, where: str) -> dict[str, Any]:
    """A keyed line back.

    Raises:
        InvalidRecordError: it is not a JSON object (``where`` names it).
    """
    value = decode_value(line)
    if not isinstance(value, dict):
        raise InvalidRecordError(f"{where}: not a JSON object")
    return value


CHECKPOINT_FORMAT = 4
"""The checkpoint format (LangGraph's ``v``) a line without ``v`` holds."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GREGORIAN = 0x01B21DD213814000
"""100-ns intervals from 1582-10-15 (a UUID's time) to 1970-01-01."""


def _id_time(checkpoint_id: str) -> int | None:
    """The microseconds since 1970 a UUIDv6 checkpoint id holds (LangGraph's
    ids are), None for another id."""
    try:
        parsed = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if parsed.version != 6 or str(parsed) != checkpoint_id:
        return None
    ticks = (parsed.int >> 64) & 0xFFFFFFFFFFFF0FFF  # its 60 bits of time, version out
    ticks = ((ticks >> 16) << 12) | (ticks & 0x0FFF)
    return (ticks - _GREGORIAN) // 10


def _ts_from(offset: int, base: int) -> str:
    return (_EPOCH + timedelta(microseconds=base + offset)).isoformat()


def ts_value(ts: Any, checkpoint_id: str) -> Any:
    """A checkpoint's ``ts`` as its line holds it: the microseconds from the
    time its UUIDv6 id holds (a few, as LangGraph makes both), when that
    gives back the very string; else ``ts`` itself."""
    base = _id_time(checkpoint_id) if isinstance(ts, str) else None
    if base is None:
        return ts
    try:
        at = datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if at.tzinfo is None:
        return ts
    offset = (at - _EPOCH) // timedelta(microseconds=1) - base
    return offset if _ts_from(offset, base) == ts else ts


def checkpoint_of(key: str, line: bytes, thread_id: str) -> dict[str, Any]:
    """A checkpoint line of ``thread_id``'s journal back, whole: its
    namespace and id (``ns``, ``id``) taken from its key, ``v`` when left
    out, ``ts`` as LangGraph gave it, and its messages position
    (``messages``, as `position_value` makes it) with its session when
    that is the conversation's.

    Raises:
        InvalidRecordError: it is not a checkpoint line.
    """
    record = decode(line, key)
    parts = key.split("/")
    if len(parts) != 3 or parts[0] != "c":
        raise InvalidRecordError(f"{key}: not a checkpoint's key")
    ns = record["ns"] = _unpart(parts[1])
    record["id"] = _unpart(parts[2])
    record.setdefault("v", CHECKPOINT_FORMAT)
    ts = record.get("ts")
    if isinstance(ts, int) and not isinstance(ts, bool):
        base = _id_time(record["id"])
        if base is None:
            raise InvalidRecordError(f"{key}: a ts offset, and an id that holds no time")
        record["ts"] = _ts_from(ts, base)
    held = record.get("messages")
    if held is not None:
        if not (
            isinstance(held, list)
            and len(held) in (2, 3)
            and isinstance(held[0], int)
            and isinstance(held[1], str)
        ):
            raise InvalidRecordError(f"{key}: a bad messages position")
        session = held[2] if len(held) == 3 else conversation_name(thread_id, ns)
        record["messages"] = {"session": session, "count": held[0], "last": held[1]}
    return record


def checkpoint_line(record: dict[str, Any], thread_id: str) -> bytes:
    """A checkpoint's line of ``thread_id``'s journal from what
    `checkpoint_of` gives: its key first, its namespace and id only in the
    key, ``ts`` as `ts_value` writes it, ``v`` left out when it is
    `CHECKPOINT_FORMAT`, its messages position ``[count, last]``, or
    ``[count, last, session]`` when its session is not the conversation's."""
    line = {k: v for k, v in record.items() if k not in ("ns", "id", "v", "messages")}
    if "ts" in line:
        line["ts"] = ts_value(line["ts"], record["id"])
    if record.get("v", CHECKPOINT_FORMAT) != CHECKPOINT_FORMAT:
        line["v"] = record["v"]
    held = record.get("messages")
    if isinstance(held, dict):
        position = [held["count"], held["last"]]
        if held["session"] != conversation_name(thread_id, record["ns"]):
            position.append(held["session"])
        line["messages"] = position
    return encode(line)


def position_of(record: dict[str, Any]) -> Position | None:
    """The messages position a checkpoint line holds, if any."""
    held = record.get("messages")
    if not isinstance(held, dict):
        return None
    session, count, last = held.get("session"), held.get("count"), held.get("last", "")
    if not (session is None or isinstance(session, str)) or not isinstance(count, int):
        raise InvalidRecordError(f"checkpoint {record.get('id')!r}: a bad messages position")
    return Position(session, count, last if isinstance(last, str) else "")


def position_value(position: Position) -> dict[str, Any]:
    return {"session": position.session, "count": position.count, "last": position.last}
