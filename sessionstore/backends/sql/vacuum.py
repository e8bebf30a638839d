"""Giving the disk back after erasures: SQLite in small steps, PostgreSQL's rewrite.

SQLite. A file made by this code keeps ``auto_vacuum=INCREMENTAL`` (set
before its first page is written, `engine`), so the pages erasures freed
can be given back without rewriting the file: ``PRAGMA
incremental_vacuum(N)`` moves up to N pages from the end of the file into
free slots and cuts the end off, each call its own short write transaction.
A chunk is sized to take about ``chunk`` seconds (measured, then scaled),
and the vacuum rests at least as long between chunks, so that a writer
waiting in SQLite's busy handler (which polls every few milliseconds in
its first tens of milliseconds) takes the lock before the next chunk: a
writer waits for one chunk at most. A WAL checkpoint (TRUNCATE) then moves
the file's new end into it and empties the ``-wal``; it waits for readers
with a short busy timeout, retried between rests, so it too holds writers
off for a bounded time only. A file made before (``auto_vacuum=NONE``) is
converted once by a full ``VACUUM``: one write transaction rewriting every
page still in use, which holds writers off for its whole run (its time
grows with what the file keeps, not with what was erased: run it after
the erasures); readers go on meanwhile (WAL).

Erased bytes stay gone: ``secure_delete`` zeroed the freed pages, the moved
pages carry only kept content, the cut end is no longer part of the file,
and the truncated WAL keeps no old page image.

PostgreSQL: docs/sql.md's procedure (Erasure, "Where the bytes go") as one
call: wait for the transactions begun before, ``VACUUM FULL`` of the tables
that hold sessions' content (each under its ``ACCESS EXCLUSIVE`` lock for
its rewrite), the schema's statistics forgotten and made again, then, as a
superuser, ``pg_statistic`` rewritten and the WAL switched and checkpointed.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError

from sessionstore.backends.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    describe,
    is_sqlite,
    open_sync_engine,
    parse_target,
)
from sessionstore.backends.sql.tables import metadata
from sessionstore.backends.vacuum_report import CHUNK, VacuumReport
from sessionstore.errors import ConfigurationError, StorageError

__all__ = ["CONTENT_TABLES", "vacuum_postgres", "vacuum_sqlite"]

_FIRST_PAGES = 64  # the first chunk's pages, before any is measured
_MAX_PAGES = 1 << 16
_CHECKPOINT_TIMEOUT = 0.1  # seconds a checkpoint waits for readers, writers held off meanwhile
_CHECKPOINT_TRIES = 50

CONTENT_TABLES = ("sessions", "entries", "titles", "listing", "activity", "search_vectors")
"""The PostgreSQL tables holding sessions' content (docs/sql.md), besides journal lines."""
_JOURNAL_TABLES = ("journal_lines",)


# ---------------------------------------------------------------- SQLite


def _sqlite_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _scalar(cursor: sqlite3.Cursor, sql: str) -> Any:
    row = cursor.execute(sql).fetchone()
    return None if row is None else row[0]


def vacuum_sqlite(
    target: str,
    *,
    chunk: float = CHUNK,
    convert: bool = True,
    full: bool = False,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    progress: Callable[[int, int], None] | None = None,
) -> VacuumReport:
    """Give a SQLite store's free pages back to the file system (blocking;
    see the module's docstring for how long writers wait).

    Args:
        target: the database (``sessions.db``, ``sqlite:///sessions.db``).
        chunk: seconds each incremental step is sized to take.
        convert: convert a file without incremental auto_vacuum by a full
            VACUUM (else such a file is left as it is, and the report says so).
        full: one full VACUUM instead of the steps: far quicker when little
            is kept, but writers wait for its whole run.
        busy_timeout: seconds a step waits for the write lock.
        progress: called after each step with the pages given back so far
            and the free pages there were at the start.

    Raises:
        ConfigurationError: the target is not a SQLite file, or ``chunk`` is not positive.
        StorageError: no such file, or SQLite failed (a kill or a failure
            mid-way leaves the file whole: every step is a transaction).
    """
    if not chunk > 0:
        raise ConfigurationError(f"chunk must be > 0 seconds, not {chunk!r}")
    url = parse_target(target)
    if not is_sqlite(url):
        raise ConfigurationError(f"{describe(url)} is not a SQLite database")
    path = url.database
    assert path is not None  # parse_target refuses URLs without one
    if not os.path.isfile(path):
        raise StorageError(f"{path}: no such database; vacuum makes none")
    report = VacuumReport(where=path, kind="sqlite", bytes_before=_sqlite_bytes(path))
    engine = open_sync_engine(target, busy_timeout=busy_timeout)
    try:
        pooled = engine.raw_connection()
        try:
            driver = pooled.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            _vacuum_file(driver, report, chunk, convert, full, busy_timeout, progress)
        finally:
            pooled.close()
    except sqlite3.Error as exc:
        raise StorageError(f"{path}: vacuum failed: {exc}") from exc
    except SQLAlchemyError as exc:
        raise StorageError(f"{path}: vacuum failed: {getattr(exc, 'orig', exc)}") from exc
    finally:
        engine.dispose()
    report.bytes_after = _sqlite_bytes(path)
    return report


def _vacuum_file(
    driver: sqlite3.Connection,
    report: VacuumReport,
    chunk: float,
    convert: bool,
    full: bool,
    busy_timeout: float,
    progress: Callable[[int, int], None] | None,
) -> None:
    cursor = driver.cursor()
    try:
        older = _scalar(cursor, "PRAGMA auto_vacuum") != 2  # 2: incremental
        if older or full:
            if older and not convert:
                report.complete = False
                report.notes.append(
                    "the file predates incremental auto_vacuum; converting it takes a full "
                    "VACUUM, which holds writers off for its whole run"
                )
                return
            # The connection asked for INCREMENTAL (`engine`); VACUUM applies it.
            started = time.perf_counter()
            cursor.execute("VACUUM")
            report.longest_step = time.perf_counter() - started
            report.converted, report.full = older, True
        # The WAL is checkpointed between steps, in the rests (a PASSIVE
        # checkpoint holds no writer off), not by a step's commit, so that a
        # step's time is the time it holds the write lock.
        cursor.execute("PRAGMA wal_autocheckpoint=0")
        pages = _FIRST_PAGES
        total = int(_scalar(cursor, "PRAGMA freelist_count"))
        while (free := int(_scalar(cursor, "PRAGMA freelist_count"))) > 0:
            started = time.perf_counter()
            # executescript steps the pragma until it is done (execute would
            # free one page): one write transaction, in autocommit.
            driver.executescript(f"PRAGMA incremental_vacuum({min(pages, free)})")
            took = time.perf_counter() - started
            report.chunks += 1
            report.pages_freed += min(pages, free)
            report.longest_step = max(report.longest_step, took)
            if progress is not None:
                progress(report.pages_freed, max(total, report.pages_freed))
            scale = chunk / took if took > 0 else 1.5
            pages = max(1, min(_MAX_PAGES, int(pages * min(1.5, max(0.25, scale)))))
            resting = time.perf_counter()
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            # The writers' turn: a rest at least as long as the step.
            time.sleep(max(0.0, max(chunk, took) - (time.perf_counter() - resting)))
        _truncate_wal(cursor, report, chunk, busy_timeout)
    finally:
        cursor.close()


def _truncate_wal(
    cursor: sqlite3.Cursor, report: VacuumReport, chunk: float, busy_timeout: float
) -> None:
    """``wal_checkpoint(TRUNCATE)``: the file's end cut, the WAL emptied. It holds
    writers off while it waits for readers: a short wait, tried again after rests."""
    cursor.execute(f"PRAGMA busy_timeout={round(_CHECKPOINT_TIMEOUT * 1000)}")
    try:
        for _ in range(_CHECKPOINT_TRIES):
            started = time.perf_counter()
            busy = _scalar(cursor, "PRAGMA wal_checkpoint(TRUNCATE)")
            report.longest_step = max(report.longest_step, time.perf_counter() - started)
            if not busy:
                return
            time.sleep(max(chunk, _CHECKPOINT_TIMEOUT))
    finally:
        cursor.execute(f"PRAGMA busy_timeout={round(busy_timeout * 1000)}")
    report.complete = False
    report.notes.append(
        "a reader kept the WAL from being truncated; the next checkpoint (the next erase, "
        "or SQLite's own) finishes it"
    )


# ---------------------------------------------------------------- PostgreSQL

_OLDER = (
    "SELECT pid FROM pg_stat_activity"
    " WHERE xact_start < :t AND pid <> pg_backend_pid()"
    " AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"
)
_FORGET = (
    "DELETE FROM pg_statistic WHERE starelid IN"
    " (SELECT oid FROM pg_class WHERE relnamespace = current_schema()::regnamespace)"
)


def vacuum_postgres(target: str, *, wait: float = 600.0) -> VacuumReport:
    """Run docs/sql.md's procedure for erased bytes on a PostgreSQL store
    (blocking). Each table is rewritten under its ``ACCESS EXCLUSIVE`` lock:
    the store's reads and writes of it wait for its copy.

    Args:
        target: the store's URL (its schema first on the ``search_path``).
        wait: seconds to wait, at each of the procedure's two waits, for the
            transactions begun before to end.

    Raises:
        StorageError: the server failed, or transactions begun before
            stayed open past ``wait`` (named by pid; nothing more was run).
    """
    engine = open_sync_engine(target)
    where = describe(engine.url)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            return _procedure(conn, where, wait)
    except SQLAlchemyError as exc:
        raise StorageError(f"{where}: vacuum failed: {getattr(exc, 'orig', exc)}") from exc
    finally:
        engine.dispose()


def _procedure(conn: Connection, where: str, wait: float) -> VacuumReport:
    present = [
        name
        for name in (*CONTENT_TABLES, *_JOURNAL_TABLES, *metadata.tables)
        if conn.execute(text("SELECT to_regclass(:name)"), {"name": name}).scalar() is not None
    ]
    tables = list(dict.fromkeys(present))  # in order, once each
    if "sessions" not in tables:
        raise StorageError(f"{where}: holds no sessionstore store in its search_path")
    report = VacuumReport(where=where, kind="postgresql", bytes_before=_pg_bytes(conn, tables))
    superuser = bool(
        conn.execute(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar()
    )
    rewritten = [name for name in tables if name in (*CONTENT_TABLES, *_JOURNAL_TABLES)]
    listed = ", ".join(rewritten)
    _wait_for_older(conn, where, _now(conn), wait)
    for name in rewritten:  # one at a time: each lock held for its own copy only
        started = time.perf_counter()
        before = _filenode(conn, name)
        # A role that may not vacuum a table (not its owner) gets a WARNING,
        # not an error, and the table is left as it was: a rewrite gives the
        # table a new file, so an unchanged one says it was skipped.
        conn.execute(text(f"VACUUM FULL {name}"))
        if _filenode(conn, name) == before:
            report.skipped.append(name)
        report.longest_step = max(report.longest_step, time.perf_counter() - started)
    if report.skipped:
        report.complete = False
        role = conn.execute(text("SELECT current_user")).scalar()
        report.notes.append(
            f"not rewritten, so their erased bytes are still on disk: {', '.join(report.skipped)} "
            f"(the role {role} may not vacuum them: run it as their owner or a superuser)"
        )
    if superuser:
        conn.execute(text(_FORGET))
    conn.execute(text(f"ANALYZE {listed}"))
    if superuser:
        _wait_for_older(conn, where, _now(conn), wait)
        conn.execute(text("VACUUM FULL pg_statistic"))
        conn.execute(text("SELECT pg_switch_wal()"))
        conn.execute(text("CHECKPOINT"))
    else:
        report.complete = False
        report.notes.append(
            "not a superuser: pg_statistic and the WAL may still hold erased values "
            "(docs/sql.md, Erasure: steps 2 and 3 need a superuser)"
        )
    report.bytes_after = _pg_bytes(conn, tables)
    return report


def _pg_bytes(conn: Connection, tables: list[str]) -> int:
    total = 0
    for name in tables:
        total += int(
            conn.execute(text("SELECT pg_total_relation_size(:name)"), {"name": name}).scalar() or 0
        )
    return total


def _filenode(conn: Connection, name: str) -> Any:
    return conn.execute(text("SELECT pg_relation_filenode(:name)"), {"name": name}).scalar()


def _now(conn: Connection) -> Any:
    return conn.execute(text("SELECT clock_timestamp()")).scalar()


def _wait_for_older(conn: Connection, where: str, moment: Any, wait: float) -> None:
    """Until no transaction begun before ``moment`` is open (VACUUM FULL copies
    the rows such a transaction may still see)."""
    deadline = time.monotonic() + wait
    while True:
        pids = [row[0] for row in conn.execute(text(_OLDER), {"t": moment})]
        if not pids:
            return
        if time.monotonic() > deadline:
            raise StorageError(
                f"{where}: transactions begun before the vacuum stay open (pids "
                f"{', '.join(map(str, pids))}); end them, or wait, and run it again"
            )
        time.sleep(0.1)
