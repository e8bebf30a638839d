"""A store holding forks of every shape an archive must carry, for the archive
tests and the differential test against the Rust store."""

from __future__ import annotations

from sessionstore import SessionEntry, SessionMeta, SessionStore
from sessionstore.testing.common import (
    IMPORTED_LINES,
    compaction,
    imported_header,
    message,
    stream,
)

FORKS = {
    "at-first": "root",
    "middle": "root",
    "deep": "middle",
    "deeper": "deep",
    "empty-fork": "empty",
    "from-imported": "imported",
}
"""Each fork made by `fill_forks`, and the session it branched from."""

SESSIONS = sorted({"root", "empty", "imported", *FORKS})
"""Every session `fill_forks` makes."""


async def fill_forks(store: SessionStore) -> None:
    """Sessions and forks of them, each side appended to after the fork:

    * ``at-first``: ``root`` forked at its first entry;
    * ``middle``: forked past a compaction, then compacted again on its own;
    * ``deep``: a fork of ``middle`` inside what it inherited, and ``deeper``
      a fork of that one, whole: forks of forks;
    * ``empty-fork``: a fork of an empty session;
    * ``from-imported``: a fork of a session imported with lines in no
      canonical form (escapes, spacing, unknown fields, ``\\r``, a message
      still streaming), kept byte for byte in the shared part.
    """
    await store.create(SessionMeta(id="root"))
    entries: list[SessionEntry] = [message("e1", "a"), message("e2", "b")]
    entries += [compaction("c1", "first", "e2"), message("e3", "c")]
    await store.append_many("root", entries)
    await store.fork("root", at="e1", meta=SessionMeta(id="at-first"))
    await store.append("at-first", message("a1", "edited"))
    await store.fork("root", at="e3", meta=SessionMeta(id="middle"))
    await store.append_many("middle", [message("m1", "d"), compaction("c2", "second", "m1")])
    await store.fork("middle", at="e2", meta=SessionMeta(id="deep"))
    await store.append("deep", message("d1", "retried"))
    await store.fork("deep", meta=SessionMeta(id="deeper"))
    await store.append("deeper", message("d2", "deeper"))
    await store.append("root", message("e4", "the source goes on"))
    await store.create(SessionMeta(id="empty"))
    await store.fork("empty", meta=SessionMeta(id="empty-fork"))
    await store.import_session(imported_header("imported"), stream(IMPORTED_LINES))
    await store.fork("imported", at="c1", meta=SessionMeta(id="from-imported"))
    await store.append("from-imported", message("i1", "after the import"))
