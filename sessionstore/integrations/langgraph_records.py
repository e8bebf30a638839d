"""The keyed journal lines `StoreSaver` keeps a LangGraph thread in.

A thread's journal (`journal_name`) holds ``c/`` checkpoints, ``b/``
channel values, ``w/`` pending writes and ``s/`` the sessions the thread
made; the store-wide journal `RUNS` holds ``r/<run>/<thread>``. Key parts
are escaped, so a prefix is one namespace's or one checkpoint's, and a
namespace's keys in descending order are its checkpoints newest first.
docs/wire-format.md (LangGraph's checkpoints) gives every member. This
module only builds and reads these objects; the JSON is `sessionstore.wire`'s.
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
    """An id as a write's key holds it: a UUID as ``~`` and the base64url of
    its 16 bytes; anything else escaped, a leading ``~`` too."""
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
        InvalidSessionIdError: the thread id is no string, or names no journal.
    """
    if not isinstance(thread_id, str):
        raise InvalidSessionIdError(repr(thread_id), "a thread_id is a string")
    try:
        return validate_session_id(JOURNAL_PREFIX + thread_id)
    except InvalidSessionIdError as exc:
        raise InvalidSessionIdError(thread_id, f"cannot name a thread: {exc.reason}") from None


def journal_of(store: SessionStore, thread_id: str) -> SessionJournal:
    """The journal of ``thread_id``, as durable as the store's appends (a
    checkpoint needs no more than the messages it points to)."""
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
    """Whether a write's key is a regular write's, not a special one's (index below 0)."""
    return not key.rsplit("/", 1)[1].startswith("-")


def conversation_name(thread_id: str, ns: str) -> str | None:
    """The conversation (head, and first session id) of a thread's namespace
    (docs/wire-format.md); None when none is a valid session id (the sessions
    then have fresh ids, and no head names them)."""
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
    """The first ``count`` messages of ``session``, the last in the entry
    ``last`` ("" and None when there are none)."""

    session: str | None
    count: int
    last: str


_SQUEEZE = 128
"""Bytes from which a serialized value is kept compressed, if that saves a quarter."""

UNCOMPRESSED_MAX = 2**30
"""The most a compressed value may give back: a line cannot hold more."""


def typed_value(typed: Typed) -> list[str]:
    """A serializer's output as a line holds it: ``[type, base64]``, or
    ``[type, base64 of its zlib stream, "zlib"]`` when a quarter shorter."""
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
    """The microseconds since 1970 a UUIDv6 checkpoint id holds; None for another id."""
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
    time its UUIDv6 id holds, when that gives back the very string; else ``ts``."""
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
    """A checkpoint line of ``thread_id``'s journal back, whole: ``ns`` and
    ``id`` from its key, ``v``, ``ts`` as LangGraph gave it, and ``messages``
    as `position_value` makes it.

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
    """`checkpoint_of` back: a checkpoint's line, as docs/wire-format.md gives it."""
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
