"""The ``sessionstore`` command: a thin shell over the library.

Every command opens the store named by ``--db`` (or ``SESSIONSTORE_DB``;
default ``./sessions.db``, SQLite), does one thing, and prints it: tables
and progress bars on a terminal, plain tab-separated text when piped.
Errors become one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from sessionstore import __version__
from sessionstore.archive import export_archive, import_archive
from sessionstore.backends import open_store
from sessionstore.demo import play_demo
from sessionstore.errors import SessionStoreError
from sessionstore.models import MessageEntry
from sessionstore.verify import verify_store

__all__ = ["main"]

DEFAULT_DB = "./sessions.db"
_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A table on a terminal; tab-separated lines, header first, when piped."""
    if _out.is_terminal:
        table = Table(title=title)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(str(cell) for cell in row))
        _out.print(table)
    else:
        for row in [columns, *rows]:
            print("\t".join(str(cell) for cell in row))


@contextmanager
def _progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on a terminal, nothing when piped."""
    with Progress(console=_err, disable=not _err.is_terminal, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _preview(text: str, width: int = 72) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ---------------------------------------------------------------- commands


async def _migrate(args: argparse.Namespace) -> int:
    from sessionstore import migrate  # alembic loads only for this command

    if args.status:
        current, head = await migrate.current(args.db), migrate.head()
        state = "up to date" if current == head else "needs `sessionstore migrate`"
        print(f"{args.db}: revision {current or '(none)'}, newest {head}: {state}")
        return 0
    await migrate.upgrade(args.db)
    print(f"{args.db}: at revision {migrate.head()}")
    return 0


async def _ls(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        summaries = sorted(await store.summaries(), key=lambda s: (s.meta.created_at, s.meta.id))
    rows = [
        (
            s.meta.id,
            s.meta.created_at,
            s.entries,
            s.last_timestamp or "-",
            "yes" if s.compacted else "no",
        )
        for s in summaries
    ]
    _table("sessions", ("id", "created", "entries", "last entry", "compacted"), rows)
    return 0


async def _show(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        if args.json:
            async for line in store.raw_lines(args.id):
                sys.stdout.write(line + "\n")
            return 0
        if args.context:
            for message in await store.load_context(args.id):
                print(f"{message.role}: {message.text()}")
            return 0
        entries = await store.load(args.id)
    rows = []
    for number, entry in enumerate(entries, 1):
        if isinstance(entry, MessageEntry):
            role, text = entry.message.role, entry.message.text()
        else:
            role, text = "-", f"[keeps from {entry.first_kept_id}] {entry.summary}"
        rows.append((number, entry.type, entry.timestamp, role, _preview(text)))
    _table(f"session {args.id}", ("#", "type", "timestamp", "role", "text"), rows)
    return 0


async def _import(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        with _progress("importing") as progress:
            report = await import_archive(store, args.path, progress=progress)
    for warning in report.warnings:
        _err.print(f"warning: {warning}", markup=False)
    print(
        f"imported {report.sessions} sessions ({report.entries} new entries) "
        f"and {report.journals} journals from {args.path}"
    )
    return 0


async def _export(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        with _progress("exporting") as progress:
            report = await export_archive(
                store, args.dir, sessions=args.session or None, progress=progress
            )
    print(
        f"exported {report.sessions} sessions ({report.entries} new entries, "
        f"{report.bytes} bytes written) and {report.journals} journals to {args.dir}"
    )
    return 0


async def _verify(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        with _progress("verifying") as progress:
            report = await verify_store(store, progress=progress)
    for fault in report.faults:
        _err.print(f"fault: {fault}", markup=False)
    verdict = "ok" if report.ok else f"{len(report.faults)} fault(s)"
    print(f"{verdict}: {report.sessions} sessions, {report.entries} entries checked")
    return 0 if report.ok else 1


async def _journal(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        journal = await store.journal(args.name).read()
    rows = [
        (
            number,
            str(s.header.started_at) if s.header else "(no header)",
            s.header.model if s.header else "-",
            len(s.writes),
            "yes" if s.writes else "no",
        )
        for number, s in enumerate(journal.sessions, 1)
    ]
    _table(f"journal {args.name}", ("#", "started", "model", "writes", "interrupted"), rows)
    skipped = ", ".join(map(str, journal.skipped)) or "none"
    interrupted = sum(1 for _ in journal.interrupted())
    print(
        f"{journal.writes()} writes, {interrupted} interrupted sessions, skipped lines: {skipped}"
    )
    return 0


async def _demo(args: argparse.Namespace) -> int:
    async with open_store(args.db) as store:
        result = await play_demo(store)
    print(f"Played a {result.entries}-entry conversation into {args.db}")
    print(f"session {result.session_id}: the context sent to the model now is")
    for message in result.context:
        print(f"  {message.role:>9}: {_preview(message.text())}")
    interrupted = list(result.journal.interrupted())
    print(
        f"journal 'demo-agent': {len(interrupted)} interrupted sessions, "
        f"{result.journal.writes()} writes to report at the next start"
    )
    same = "byte-identical" if result.identical else "DIFFERENT"
    print(
        f"archive round trip (export, import, export): {result.archive_files} files, "
        f"{result.archive_bytes} bytes, {same}"
    )
    print(f"next: sessionstore show {result.session_id} --db {args.db}")
    return 0 if result.identical else 1


# ---------------------------------------------------------------- parser


def _command(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser,
    name: str,
    run: Command,
    summary: str,
    example: str,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        parents=[common],
        help=summary,
        description=summary,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = argparse.ArgumentParser(
        prog="sessionstore",
        description="Keep the conversation histories of LLM agents safe.",
        epilog="example:\n  sessionstore demo && sessionstore ls",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sessionstore {__version__}")
    parser.add_argument(
        "--db",
        default=os.environ.get("SESSIONSTORE_DB") or DEFAULT_DB,
        help="the store: sqlite:///file.db, a .db path, a directory (JSONL) "
        "(env SESSIONSTORE_DB; default ./sessions.db)",
    )
    # --db may also follow the command; SUPPRESS keeps the value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    migrate_ = _command(
        commands,
        common,
        "migrate",
        _migrate,
        "upgrade a SQL database's schema to the newest revision",
        "sessionstore migrate --db sqlite:///sessions.db",
    )
    migrate_.add_argument("--status", action="store_true", help="show the revision only")
    _command(
        commands,
        common,
        "ls",
        _ls,
        "list sessions: id, created, entries, last entry time, compacted",
        "sessionstore ls --db sessions.db",
    )
    show = _command(
        commands,
        common,
        "show",
        _show,
        "show a session's entries",
        "sessionstore show 3f2b9c1e-0000-4000-8000-000000000000 --context",
    )
    show.add_argument("id", help="the session id")
    view = show.add_mutually_exclusive_group()
    view.add_argument("--context", action="store_true", help="the context built for the model")
    view.add_argument("--json", action="store_true", help="the stored lines, verbatim (pipeable)")
    imported = _command(
        commands,
        common,
        "import",
        _import,
        "import a JSONL archive (sessions/ and journals/)",
        "sessionstore import ./archive --db sessions.db",
    )
    imported.add_argument("path", help="the archive directory")
    exported = _command(
        commands,
        common,
        "export",
        _export,
        "export sessions and journals as a JSONL archive (incremental)",
        "sessionstore export ./archive --session 3f2b9c1e-0000-4000-8000-000000000000",
    )
    exported.add_argument("dir", help="the archive directory")
    exported.add_argument(
        "--session", action="append", metavar="ID", help="export only this session (repeatable)"
    )
    _command(
        commands,
        common,
        "verify",
        _verify,
        "check every line decodes, seq has no gap, compaction targets exist, integrity",
        "sessionstore verify --db sessions.db",
    )
    journal = _command(
        commands,
        common,
        "journal",
        _journal,
        "show an agent's crash-recovery journal",
        "sessionstore journal demo-agent",
    )
    journal.add_argument("name", help="the journal name")
    _command(
        commands,
        common,
        "demo",
        _demo,
        "play a realistic agent conversation into the store and show what it keeps",
        "sessionstore demo --db demo.db",
    )
    return parser


def _one_line(error: BaseException) -> str:
    return "; ".join(part.strip() for part in str(error).splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    run: Command = args.run
    try:
        return asyncio.run(run(args))
    except SessionStoreError as exc:
        _err.print(f"sessionstore: error: {_one_line(exc)}", markup=False)
    except OSError as exc:
        _err.print(f"sessionstore: error: {exc}", markup=False)
    except KeyboardInterrupt:
        _err.print("sessionstore: interrupted", markup=False)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
