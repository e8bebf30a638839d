"""`vacuum`: give the disk back after erasures, on any store's target.

SQLite shrinks its file in small steps, PostgreSQL runs the rewrite
docs/sql.md documents (`sessionstore.backends.sql.vacuum`). A JSONL
store's erase already deletes the session's files (vacuum removes only the
index of ids an earlier version kept), and memory:// keeps nothing on disk.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from sessionstore.backends.jsonl.hints import forget_all_ids
from sessionstore.backends.targets import is_sql_target
from sessionstore.backends.vacuum_report import CHUNK, VacuumReport
from sessionstore.errors import ConfigurationError, StorageError

__all__ = ["VacuumReport", "vacuum"]


async def vacuum(
    target: str | os.PathLike[str],
    *,
    chunk: float = CHUNK,
    convert: bool = True,
    full: bool = False,
    wait: float = 600.0,
    progress: Callable[[int, int], None] | None = None,
) -> VacuumReport:
    """Give back the space erasures freed, with the store in use; docs/sql.md, Vacuum.

    SQLite: the free pages leave the file in steps of about ``chunk``
    seconds, each its own write transaction with a rest after it (a writer
    waits for one step at most), then the WAL is truncated. A file made
    before incremental auto_vacuum is first converted by a full VACUUM,
    which holds writers off for its whole run (``convert=False`` leaves it).
    ``full=True`` runs that full VACUUM instead of the steps: when most of
    the file was erased it is far quicker (1.3 s against 134 s for a 1.2 GB
    file 90% erased, benchmarks/RESULTS.md), but writers wait for all of it.
    PostgreSQL: ``VACUUM FULL`` of the tables holding content (each locked
    ``ACCESS EXCLUSIVE`` while copied), the statistics made again, and as a
    superuser ``pg_statistic`` rewritten and the WAL checkpointed. JSONL: the
    index of ids an earlier version kept (``.ids/``, read by nothing now) is
    removed; their erase leaves nothing else behind. Memory: nothing to do.

    Args:
        target: the store, as `open_store` takes it.
        chunk: SQLite: seconds each step is sized to take.
        convert: SQLite: convert an older file by a full VACUUM.
        full: SQLite: one full VACUUM instead of the steps.
        wait: PostgreSQL: seconds to wait for transactions begun before to end.
        progress: SQLite: called after each step as ``progress(done, total)``,
            in pages.

    Returns:
        The sizes before and after, and what was left undone.

    Raises:
        ConfigurationError: the target names no store, or ``chunk`` is not positive.
        StorageError: the store is missing, the database failed, or (PostgreSQL)
            older transactions stayed open past ``wait``. Every step is a
            transaction: one stopped (even by a kill) leaves the store whole.
    """
    text = os.fspath(target)
    if is_sql_target(text):
        from sessionstore.backends.sql import vacuum as sql  # SQLAlchemy loads only now
        from sessionstore.backends.sql.engine import is_sqlite, parse_target

        if is_sqlite(parse_target(text)):
            return await asyncio.to_thread(
                sql.vacuum_sqlite,
                text,
                chunk=chunk,
                convert=convert,
                full=full,
                progress=progress,
            )
        return await asyncio.to_thread(sql.vacuum_postgres, text, wait=wait)
    if text == "memory://":
        return VacuumReport(
            where=text,
            kind="memory",
            notes=["memory:// keeps nothing on disk; an erased session is freed at once"],
        )
    if not text.strip() or ("://" in text and not text.startswith("jsonl://")):
        raise ConfigurationError(f"{text!r} names no store: give a directory or a database")
    directory = Path(text.removeprefix("jsonl://"))
    size = await asyncio.to_thread(_directory_bytes, directory)
    given = await asyncio.to_thread(forget_all_ids, directory)
    return VacuumReport(
        where=str(directory),
        kind="jsonl",
        bytes_before=size,
        bytes_after=size - given,
        notes=["a JSONL store's erase deletes the session's files at once"],
    )


def _directory_bytes(directory: Path) -> int:
    if not directory.is_dir():
        raise StorageError(f"{directory}: no such store directory")
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # gone meanwhile
    return total
