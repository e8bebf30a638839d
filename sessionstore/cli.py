"""The ``sessionstore`` command: a thin shell over the library.

Every command opens the store named by ``--db`` (or ``SESSIONSTORE_DB``;
default ``./sessions.db``, SQLite), does one thing, and prints it: tables
and progress bars on a terminal, plain tab-separated text when piped.

What the store holds is shown as it is, never read as markup, with control
characters escaped. Commands that only read (``ls``, ``show``, ``verify``,
``export``, ``html``, ``journal``, ``erasures``, ``migrate --status``), and ``erase``,
refuse a store that does not exist rather than create an empty one. Errors
become one line on stderr and a non-zero exit, never a traceback; Ctrl-C
stops at once with status 130, and a closed pipe (``| head``) ends the output quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import hashlib
import logging
import os
import queue
import re
import signal
import sys
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from sessionstore import __version__
from sessionstore.archive import ArchiveReport, export_archive, import_archive, retire
from sessionstore.archive.report import HEADS, JOURNALS, SESSIONS
from sessionstore.backends import open_store
from sessionstore.backends.targets import is_sql_target
from sessionstore.context import check_pairing
from sessionstore.demo import play_demo
from sessionstore.errors import ArchiveError, SessionStoreError, validate_session_id
from sessionstore.models import MessageEntry, SessionEntry, SessionMeta
from sessionstore.store import SessionStore, SessionSummary
from sessionstore.transcript import export_html, render_html, write_html
from sessionstore.verify import verify_store

__all__ = ["DB_ENV", "DEFAULT_DB", "build_parser", "main"]

DEFAULT_DB = "./sessions.db"
DB_ENV = "SESSIONSTORE_DB"
"""The environment variable naming the store (alembic's ``env.py`` reads it too)."""

HTML = "html"  # <archive>/html/<id>.html: export --html's pages, which import ignores
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a writer whose reader left

_out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
_err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


class _Refused(Exception):
    """The command line refuses what it was asked: one line on stderr, status 1."""


# ---------------------------------------------------------------- output

_T = TypeVar("_T")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LITERAL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _hex(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _escaped(text: str) -> str:
    """A message on one line: control characters (a newline in a file name
    or an id) written as ``\\xNN``, so each message stays one line."""
    return _CONTROL.sub(_hex, text)


def _cell(text: str) -> str:
    """Stored text on one line, safe for a terminal and a tab-separated line:
    runs of whitespace become one space, other control characters are
    written as ``\\xNN`` (an escape sequence in a message is shown, not run)."""
    return _escaped(" ".join(text.split()))


def _literal(text: str) -> str:
    """Stored text as it is, lines kept, other control characters escaped."""
    return _LITERAL.sub(_hex, text)


def _preview(text: str, width: int = 72) -> str:
    flat = _cell(text)
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def _count(number: int, noun: str, plural: str | None = None) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _warn(message: str) -> None:
    _err.print(Text(f"warning: {_escaped(message)}"))


def _tsv(row: Iterable[object]) -> None:
    sys.stdout.write("\t".join(_cell(str(cell)) for cell in row) + "\n")


def _table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    whole: Sequence[str] = (),
    right: Sequence[str] = (),
) -> None:
    """A table on a terminal; tab-separated lines, header first, when piped.

    Cells are literal text. The ``whole`` columns are never cut nor wrapped
    (ids, which are copied from here), others fold onto more lines.
    """
    if not _out.is_terminal:
        for row in [columns, *rows]:
            _tsv(row)
        return
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for at, column in enumerate(columns):
        longest = max((len(_cell(str(row[at]))) for row in rows), default=0)
        table.add_column(
            Text(column),
            no_wrap=column in whole,
            overflow="fold",
            min_width=longest if column in whole else None,
            justify="right" if column in right else "left",
        )
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(_cell(str(cell))) for cell in row))
    _out.print(table, soft_wrap=False)


@contextmanager
def _progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on a terminal, nothing when piped."""
    with Progress(console=_err, disable=not _err.is_terminal, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# ---------------------------------------------------------------- stores


def _store_directory(target: str) -> Path | None:
    """The directory a JSONL store target names; None for other targets."""
    if target.startswith("jsonl://"):
        return Path(target[len("jsonl://") :])
    if "://" in target or is_sql_target(target):
        return None  # a SQL database, memory://, or a scheme open_store refuses
    return Path(target)


async def _check_store(target: str, *, read: bool, schema: bool = True) -> None:
    """Refuse a store that a command would only create by mistake.

    Every command refuses an archive given as a store. A command that only
    reads (``read``) refuses a store that does not exist, and (``schema``) a
    SQL database that holds no sessionstore schema, which opening would
    create: a mistyped ``--db`` is an error, not an empty store.
    """
    directory = _store_directory(target)
    if directory is not None:
        if (directory / SESSIONS).is_dir():
            raise _Refused(
                f"{target} is an archive ({SESSIONS}/ and {JOURNALS}/), not a store; "
                f"its {SESSIONS}/ reads as one: --db {directory / SESSIONS}"
            )
        if read and not directory.exists():
            raise _Refused(f"no such store: {target} (no such directory)")
        return
    if not (read and is_sql_target(target)):
        return
    from sessionstore.backends.sql.engine import is_sqlite, parse_target

    url = parse_target(target)
    if is_sqlite(url) and not _exists(url.database or ""):
        raise _Refused(f"no such database: {target}")
    if schema:
        from sessionstore import migrate  # alembic loads only for a SQL store

        if await migrate.current(target) is None:
            raise _Refused(
                f"{target} holds no sessionstore store (no schema): nothing to read; "
                f"`sessionstore migrate --db {target}` would create one"
            )


def _exists(path: str) -> bool:
    return Path(path).exists()


@asynccontextmanager
async def _opened(args: argparse.Namespace, *, read: bool) -> AsyncIterator[SessionStore]:
    """The store of ``--db``, checked as `_check_store` does, closed at the end."""
    await _check_store(args.db, read=read)
    async with open_store(args.db) as store:
        yield store


# ---------------------------------------------------------------- commands


async def _migrate(args: argparse.Namespace) -> int:
    from sessionstore import migrate  # alembic loads only for this command

    if args.status:
        await _check_store(args.db, read=True, schema=False)
        current, head = await migrate.current(args.db), migrate.head()
        state = "up to date" if current == head else "needs `sessionstore migrate`"
        print(f"{args.db}: revision {current or '(none)'}, newest {head}: {state}")
        return 0
    await _check_store(args.db, read=False)
    await migrate.upgrade(args.db)
    print(f"{args.db}: at revision {migrate.head()}")
    return 0


async def _ls(args: argparse.Namespace) -> int:
    async with _opened(args, read=True) as store:
        summaries = sorted(
            await store.summaries(limit=None), key=lambda s: (s.meta.created_at, s.meta.id)
        )
        heads = await _heads_by_session(store) if args.tree else {}
    faulty = [s for s in summaries if s.fault is not None]
    for summary in faulty:
        _warn(f"{summary.fault}")
    if args.tree:
        for line in _tree(summaries, heads):
            _out.print(line) if _out.is_terminal else print(line.plain)
    elif _out.is_terminal:
        _sessions_on_terminal(summaries)
    else:
        _tsv(("id", "created", "entries", "last entry", "compacted", "fault", "parent"))
        for s in summaries:
            fault = "-" if s.fault is None else "corrupt"
            compacted = "yes" if s.compacted else "no"
            created, last = s.meta.created_at or "-", s.last_timestamp or "-"
            parent = s.meta.parent_session or "-"
            _tsv((s.meta.id, created, s.entries, last, compacted, fault, parent))
    if faulty:
        _warn(
            f"{_count(len(faulty), 'session')} marked corrupt: its data does not decode "
            "(`sessionstore verify` lists every fault)"
        )
        return 1
    return 0


async def _heads_by_session(store: SessionStore) -> dict[str, list[str]]:
    """The names of the heads standing on each session."""
    standing: dict[str, list[str]] = collections.defaultdict(list)
    for name in sorted(await store.heads()):
        session_id = await store.head(name)
        if session_id is not None:
            standing[session_id].append(name)
    return standing


def _tree(summaries: Sequence[SessionSummary], heads: dict[str, list[str]]) -> list[Text]:
    """Sessions as a forest of forks: each under its parent, oldest first.

    A session whose parent is not in the store starts a tree of its own,
    saying so; sessions caught in a loop of parents (only data written by
    hand can make one) are drawn as trees of their own after the rest.
    """
    known = {s.meta.id for s in summaries}
    children: dict[str, list[SessionSummary]] = collections.defaultdict(list)
    roots = []
    for s in summaries:
        parent = s.meta.parent_session
        if parent in known and parent != s.meta.id:
            children[parent].append(s)
        else:
            roots.append(s)
    lines: list[Text] = []
    drawn: set[str] = set()
    # Depth first without recursion: a chain of forks can be thousands deep.
    stack = [(root, "", "", True) for root in reversed(roots)]
    leftovers = iter(summaries)
    while stack or len(drawn) < len(summaries):
        if not stack:  # only a loop of parents is left
            s = next(s for s in leftovers if s.meta.id not in drawn)
            stack.append((s, "", "", True))
        s, lead, branch, top = stack.pop()
        if s.meta.id in drawn:
            continue
        drawn.add(s.meta.id)
        line = Text(lead + branch)
        line.append(_cell(s.meta.id), style="bold" if top else "")
        line.append(f"  {_count(s.entries, 'entry', 'entries')}", style="dim")
        if s.compacted:
            line.append(", compacted", style="dim")
        parent = s.meta.parent_session
        if top and parent is not None:
            line.append(f"  (fork of {_cell(parent)}, not in this store)", style="dim")
        for name in heads.get(s.meta.id, ()):
            line.append(f"  <- {_cell(name)}", style="bold green")
        if s.fault:
            line.append("  corrupt", style="bold red")
        lines.append(line)
        below = children.get(s.meta.id, [])
        inner = lead + ("" if top else ("   " if branch == "└─ " else "│  "))
        for at, child in reversed(list(enumerate(below))):
            stack.append((child, inner, "└─ " if at == len(below) - 1 else "├─ ", False))
    return lines


def _sessions_on_terminal(summaries: Sequence[SessionSummary]) -> None:
    """``ls`` on a terminal: a table when it fits, else two lines a session.

    An id is never cut nor folded by us: it is what one copies into
    ``show``, and a line longer than the terminal is wrapped by the
    terminal itself, which copies it back as one line.
    """
    # Ids too long for the terminal widen their own line only.
    fits = [len(s.meta.id) for s in summaries if len(s.meta.id) + 22 <= _out.width]
    width = max(fits, default=2)
    stamp = max((len(_cell(s.meta.created_at or "-")) for s in summaries), default=7)
    last = max((len(_cell(s.last_timestamp or "-")) for s in summaries), default=10)
    one_line = width + stamp + last + 7 + 9 + 7 * 2 <= _out.width

    def head(id_: str, entries: str, compacted: str, fault: str, style: str = "") -> Text:
        line = Text(f" {id_:<{width}}  {entries:>7}  {compacted:<9}", style=style)
        if fault:
            line.append(f"  {fault}", style=style or "bold red")
        return line

    _out.print(Text("sessions", style="bold"))
    if one_line:
        columns = f"  {'created':<{stamp}}  {'last entry':<{last}}"
        _out.print(head("id", "entries", "compacted", "", "bold").append(columns, style="bold"))
    else:
        _out.print(head("id", "entries", "compacted", "", "bold"))
        _out.print(Text("   created → last entry", style="bold"))
    for s in summaries:
        compacted = "yes" if s.compacted else "no"
        line = head(s.meta.id, str(s.entries), compacted, "corrupt" if s.fault else "")
        times = (_cell(s.meta.created_at or "-"), _cell(s.last_timestamp or "-"))
        if one_line and not s.fault:
            line.append(f"  {times[0]:<{stamp}}  {times[1]:<{last}}")
        else:
            line.append(f"\n   {times[0]} → {times[1]}")
        _out.print(line)
    _out.print(Text(_count(len(summaries), "session"), style="dim"))


def _entry_text(entry: SessionEntry) -> tuple[str, str]:
    """An entry's role and text, as ``show`` lists them."""
    if isinstance(entry, MessageEntry):
        return entry.message.role, entry.message.text()
    return "-", f"[keeps from {entry.first_kept_id}] {entry.summary}"


async def _numbered(
    items: AsyncIterator[_T], *, limit: int | None, tail: int | None
) -> AsyncIterator[tuple[int, _T]]:
    """Items numbered from 1, the first ``limit`` or the last ``tail`` of them.

    Streams: an item is handed on as soon as it is read (``tail`` keeps the
    last ``tail`` in memory until the end).
    """
    if tail is not None:
        last: collections.deque[tuple[int, _T]] = collections.deque(maxlen=tail)
        number = 0
        async for item in items:
            number += 1
            last.append((number, item))
        for numbered in last:
            yield numbered
        return
    number = 0
    async for item in items:
        if limit is not None and number >= limit:
            break
        number += 1
        yield number, item


class _EntryLines:
    """``show``'s rows, written as they come: a grid on a terminal, one
    tab-separated line per entry when piped."""

    def __init__(self) -> None:
        self.terminal = _out.is_terminal
        self.width = _out.width
        self.rows = 0

    def header(self, session_id: str) -> None:
        if self.terminal:
            _out.print(Text(f"session {session_id}", style="bold"))
            _out.print(self._line("#", "id", "type", "role", "timestamp", "text", bold=True))
        else:
            _tsv(("#", "type", "timestamp", "role", "text", "id"))

    def row(self, number: int, entry: SessionEntry) -> None:
        role, text = _entry_text(entry)
        if self.terminal:
            _out.print(self._line(str(number), entry.id, entry.type, role, entry.timestamp, text))
        else:
            _tsv((number, entry.type, entry.timestamp, role, _preview(text), entry.id))
            if self.rows % 1000 == 0:
                sys.stdout.flush()  # the first line at once, then in large writes
        self.rows += 1

    def _line(
        self,
        number: str,
        entry_id: str,
        kind: str,
        role: str,
        timestamp: str,
        text: str,
        *,
        bold: bool = False,
    ) -> Text:
        """One entry: on one line when the terminal is wide enough for its text
        beside the rest, otherwise its text on a second, indented line. The
        id comes whole (`fork --at` takes it), on a line of its own below."""
        head = f"{number:>7}  {_cell(kind):<10}  {_preview(role, 9):<9}  {_cell(timestamp)}"
        line = Text(head, style="bold" if bold else "")
        room = self.width - len(head) - 2
        if room >= 40:
            line.append("  " + _preview(text, room))
        elif not bold:
            line.append("\n" + " " * 9 + _preview(text, self.width - 9))
        line.append("\n" + " " * 9 + _cell(entry_id), style="bold dim" if bold else "dim")
        return line

    def footer(self, total: str) -> None:
        if self.terminal:
            _out.print(Text(total, style="dim"))


async def _show(args: argparse.Namespace) -> int:
    limit, tail = args.limit, args.tail
    if args.check is not None and not args.context:
        raise _Refused("--check looks at the context: give --context too")
    async with _opened(args, read=True) as store:
        if args.json:
            lines = store.raw_lines(args.id)
            try:
                async for header in lines:
                    sys.stdout.write(header + "\n")
                    break
                async for _, line in _numbered(lines, limit=limit, tail=tail):
                    sys.stdout.write(line + "\n")
            finally:
                if isinstance(lines, AsyncGenerator):  # close the file or cursor now
                    await lines.aclose()
            return 0
        if args.context:
            messages = await store.load_context(args.id)
            orphans = [] if args.check is None else check_pairing(messages, dialect=args.check)
            shown = messages[len(messages) - tail :] if tail is not None else messages[:limit]
            for message in shown:
                if _out.is_terminal:
                    role = Text(f"{_cell(message.role)}: ", style="bold")
                    _out.print(role.append(_literal(message.text())))
                else:
                    print(f"{_cell(message.role)}: {_literal(message.text())}")
            for orphan in orphans:
                _err.print(Text(f"orphan: {_escaped(str(orphan))}"))
            if orphans:
                raise _Refused(
                    f"the context of {args.id} has {_count(len(orphans), 'orphan')} "
                    f"a model API would refuse ({args.check}); `load_context(..., repair=...)` "
                    "gives one it takes"
                )
            return 0
        out = _EntryLines()
        stream = store.iter_entries(args.id)
        try:
            numbered = _numbered(stream, limit=limit, tail=tail)
            first = await anext(numbered, None)  # a missing session raises here
            out.header(args.id)
            if first is not None:
                out.row(*first)
            async for number, entry in numbered:
                out.row(number, entry)
        finally:
            await stream.aclose()
    out.footer(_count(out.rows, "entry", "entries") + " shown")
    return 0


async def _fork(args: argparse.Namespace) -> int:
    if args.head is not None:
        validate_session_id(args.head)  # before anything is made
    # A chosen id gets what a new session has: a creation time, now.
    meta = None if args.id is None else SessionMeta.new().model_copy(update={"id": args.id})
    async with _opened(args, read=True) as store:
        made = await store.fork(args.source, at=args.at, meta=meta)
        if args.head is not None:
            await store.set_head(args.head, made.id)
    print(made.id)
    return 0


async def _head(args: argparse.Namespace) -> int:
    async with _opened(args, read=True) as store:
        if args.name is None:
            names = sorted(await store.heads())
            rows = [(name, await store.head(name) or "-") for name in names]
            _pairs("heads", ("head", "session"), rows, " -> ")
            return 0
        if args.set is not None:
            await store.set_head(args.name, args.set)
        history = await store.head_history(args.name)
    if not history:
        raise _Refused(f"no head named {args.name!r} (`sessionstore head` lists them)")
    rows = [(move.at, move.session_id) for move in history]
    _pairs(f"head {args.name}", ("moved at", "session"), rows, "  ")
    return 0


def _pairs(title: str, columns: tuple[str, str], rows: Sequence[tuple[str, str]], sep: str) -> None:
    """Two columns of ids and times, never cut: one line per row on a terminal
    (a table would fold or drop them when narrow), tab-separated when piped."""
    if not _out.is_terminal:
        _table(title, columns, rows)
        return
    _out.print(Text(title, style="bold"))
    for left, right in rows:
        _out.print(Text(f" {_cell(left)}{sep}").append(_cell(right), style="bold"))


async def _erase(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise _Refused("--reason must say why (it is kept in the erasure record)")
    if not args.yes and not sys.stdin.isatty():
        raise _Refused(
            "erase asks for confirmation on a terminal; pass --yes to erase from a script"
        )
    async with _opened(args, read=True) as store:
        digest = None
        if not args.yes:
            seen, lines = hashlib.blake2b(digest_size=32), 0
            async for block in store.raw_blocks(args.id):  # not found: refused before asking
                seen.update(block)
                lines += block.count(b"\n")
            entries = _count(max(lines - 1, 0), "entry", "entries")
            question = f"erase session {args.id!r} ({entries}) for good? [y/N] "
            _err.print(Text(_escaped(question)), end="")
            answer = await asyncio.to_thread(sys.stdin.readline)  # Ctrl-C stops it
            if answer.strip().lower() != "y":
                raise _Refused(f"not confirmed: session {args.id!r} is left as it is")
            digest = seen.hexdigest()  # only what was shown: an append since refuses it
        record = await store.erase(args.id, reason=args.reason, digest=digest)
    entries = _count(record.lines, "entry", "entries")
    print(f"erased {_escaped(record.name)}: {entries}, blake2b-256 {record.digest}")
    return 0


async def _erasures(args: argparse.Namespace) -> int:
    async with _opened(args, read=True) as store:
        records = await store.erasures()
    if not _out.is_terminal:  # whole digests, for scripts to compare
        rows = [(r.kind, r.name, r.at, r.reason, r.lines, r.digest) for r in records]
        _table("erasures", ("kind", "name", "at", "reason", "lines", "digest"), rows)
        return 0
    # On a terminal, a few lines per record, readable at any width (the
    # digest cut to 16 digits; piped, it comes whole).
    _out.print(Text("erasures", style="bold"))
    for r in records:
        lines = (
            _count(r.lines, "entry", "entries") if r.kind == "session" else _count(r.lines, "line")
        )
        head = Text(f" {r.kind} ").append(_cell(r.name), style="bold")
        _out.print(head.append(f"  erased {_cell(r.at)}", style="dim"))
        _out.print(Text(f"   {lines}, blake2b-256 {r.digest[:16]}…  reason: {_cell(r.reason)}"))
    _out.print(Text(_count(len(records), "erasure"), style="dim"))
    return 0


def _refusals(report: ArchiveReport) -> None:
    for warning in report.warnings:
        _warn(str(warning))
    for issue in report.skipped:
        _warn(f"skipped {issue}")
    for issue in report.refused:
        _err.print(Text(f"refused: {_escaped(str(issue))}"))
    for fault in report.faults:
        _err.print(Text(f"fault: {_escaped(fault)}"))


def _archive_error(error: ArchiveError) -> ArchiveReport:
    """The report of an export or import that refused files, its refusals printed."""
    report = error.report
    if not isinstance(report, ArchiveReport):
        raise error  # not a run's refusals: the archive itself (printed as an error)
    _refusals(report)
    return report


def _check_archive(path: str) -> None:
    if not _exists(path):
        raise _Refused(f"no such archive: {path} (it does not exist)")
    if not Path(path).is_dir():
        raise _Refused(f"{path} is not an archive: not a directory")


async def _import(args: argparse.Namespace) -> int:
    _check_archive(args.path)
    refused: ArchiveError | None = None
    async with _opened(args, read=False) as store:
        with _progress("importing") as progress:
            try:
                report = await import_archive(store, args.path, progress=progress)
            except ArchiveError as exc:
                report, refused = _archive_error(exc), exc
    if refused is None:
        _refusals(report)
    print(
        f"imported {_count(report.sessions, 'session')} "
        f"({_count(report.entries, 'new entry', 'new entries')}), "
        f"{_count(report.journals, 'journal')} and {_count(report.heads, 'head')} from {args.path}"
    )
    if refused is not None:
        raise _Refused(f"import refused {_count(len(report.refused), 'file')} (listed above)")
    return 0


def _check_export_directory(dest: Path) -> None:
    """Refuse to export into a file, or a directory that holds other things
    than an archive (into which an archive would be mixed)."""
    if not dest.exists():
        return
    if not dest.is_dir():
        raise _Refused(f"cannot export to {dest}: not a directory")
    parts = (SESSIONS, JOURNALS, HEADS, HTML)
    foreign = sorted(p.name for p in dest.iterdir() if p.name not in parts)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise _Refused(
            f"cannot export to {dest}: not empty and not an archive (it holds {shown}); "
            f"an archive holds only {SESSIONS}/, {JOURNALS}/, {HEADS}/ (and {HTML}/): "
            "choose a new or empty directory"
        )


async def _export(args: argparse.Namespace) -> int:
    _check_export_directory(Path(args.dir))
    refused: ArchiveError | None = None
    async with _opened(args, read=True) as store:
        with _progress("checking") as progress:
            progress(0, 1)
            faults = [s for s in await store.summaries(limit=None) if s.fault is not None]
            progress(1, 1)
        if args.session:
            faults = [s for s in faults if s.meta.id in args.session]
        with _progress("exporting") as progress:
            try:
                report = await export_archive(
                    store, args.dir, sessions=args.session or None, progress=progress
                )
            except ArchiveError as exc:
                report, refused = _archive_error(exc), exc
        unpaged: list[tuple[str, str]] = []
        if args.html:
            with _progress("pages") as progress:
                progress(0, 1)
                unpaged = await export_html(store, Path(args.dir) / HTML, sessions=args.session)
                progress(1, 1)
    if refused is None:
        _refusals(report)
    for session_id, why in unpaged:
        _err.print(Text(f"fault: no page for {_escaped(session_id)}: {_escaped(why)}"))
    for summary in faults:
        _err.print(
            Text(f"fault: {summary.fault} (exported as stored: `import` will refuse that file)")
        )
    print(
        f"exported {_count(report.sessions, 'session')} "
        f"({_count(report.entries, 'new entry', 'new entries')}, "
        f"{_count(report.bytes, 'byte')} written), "
        f"{_count(report.journals, 'journal')} and {_count(report.heads, 'head')} to {args.dir}"
    )
    if refused is not None:
        what = _count(len(report.refused), "file") + (
            f" and could not read {_count(len(report.faults), 'stored file')}"
            if report.faults
            else ""
        )
        raise _Refused(f"export refused {what} (listed above)")
    if unpaged:
        raise _Refused(f"{_count(len(unpaged), 'page')} could not be written (listed above)")
    if faults:
        raise _Refused(
            f"{_count(len(faults), 'session')} exported with data that does not decode "
            "(listed above); `sessionstore verify` lists every fault"
        )
    return 0


async def _html(args: argparse.Namespace) -> int:
    async with _opened(args, read=True) as store:
        if args.out is None:
            await write_html(store, args.id, sys.stdout)
            return 0
        # The page is rendered before the file is made: a missing session
        # leaves no empty file behind.
        chunks = render_html(store, args.id)
        first = await anext(chunks)
        out = await asyncio.to_thread(open, args.out, "w", encoding="utf-8", newline="\n")
        with out:
            out.write(first)
            async for chunk in chunks:
                out.write(chunk)
    return 0


async def _retire(args: argparse.Namespace) -> int:
    if args.before is None and args.idle is None and not args.session:
        raise _Refused("retire needs --before, --idle or --session: it never retires everything")
    _check_export_directory(Path(args.to))
    async with _opened(args, read=True) as store:
        with _progress("retiring") as progress:
            report = await retire(
                store,
                args.to,
                before=args.before,
                idle_for=args.idle,
                sessions=args.session,
                progress=progress,
            )
    for session_id in report.retired:
        print(f"retired {_escaped(session_id)}")
    for issue in report.skipped:
        label = "fault: skipped" if issue.fault else "skipped"
        _err.print(Text(f"{label} {_escaped(str(issue))}"))
    print(
        f"retired {_count(len(report.retired), 'session')} "
        f"({_count(report.bytes, 'byte')}) to {report.archive}; "
        f"skipped {len(report.skipped)}"
    )
    faults = sum(issue.fault for issue in report.skipped)
    if faults:
        raise _Refused(f"{_count(faults, 'session')} with a fault (listed above)")
    return 0


async def _verify(args: argparse.Namespace) -> int:
    async with _opened(args, read=True) as store:
        with _progress("verifying") as progress:
            report = await verify_store(store, progress=progress)
    for note in report.notes:
        _err.print(Text(f"note: {_escaped(note)}"))
    for fault in report.faults:
        _err.print(Text(f"fault: {_escaped(fault)}"))
    verdict = "ok" if report.ok else _count(len(report.faults), "fault")
    noted = f" ({_count(len(report.notes), 'note')})" if report.notes else ""
    print(
        f"{verdict}: {_count(report.sessions, 'session')}, "
        f"{_count(report.entries, 'entry', 'entries')} checked{noted}"
    )
    return 0 if report.ok else 1


async def _journal(args: argparse.Namespace) -> int:
    async with _opened(args, read=True) as store:
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
    columns = ("#", "started", "model", "writes", "interrupted")
    _table(f"journal {args.name}", columns, rows, right=("#", "writes"))
    skipped = ", ".join(map(str, journal.skipped)) or "none"
    interrupted = sum(1 for _ in journal.interrupted())
    print(
        f"{_count(journal.writes(), 'write')}, "
        f"{_count(interrupted, 'interrupted session')}, skipped lines: {skipped}"
    )
    return 0


async def _demo(args: argparse.Namespace) -> int:
    async with _opened(args, read=False) as store:
        result = await play_demo(store)
    print(f"Played a {result.entries}-entry conversation into {args.db}")
    print(f"session {result.session_id}, the context sent to the model:")
    for message in result.context:
        print(f"  {_cell(message.role):>9}: {_preview(message.text(), 66)}")
    interrupted = list(result.journal.interrupted())
    print(
        f"journal 'demo-agent': {_count(len(interrupted), 'interrupted session')}, "
        f"{_count(result.journal.writes(), 'write')} to report"
    )
    same = "byte-identical" if result.identical else "DIFFERENT"
    print(
        f"archive round trip (export, import, export): {_count(result.archive_files, 'file')}, "
        f"{_count(result.archive_bytes, 'byte')}, {same}"
    )
    print(f"next: sessionstore show {result.session_id} --db {args.db}")
    return 0 if result.identical else 1


# ---------------------------------------------------------------- parser

_DB_HELP = (
    "the store: a .db path or sqlite:///file.db, postgresql://..., a directory "
    f"(JSONL) or jsonl:///dir (default: ${DB_ENV}, else {DEFAULT_DB})"
)


def _count_argument(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {number}")
    return number


def _date_argument(text: str) -> str:
    """``--before``: an RFC 3339 time, or a bare date meaning its midnight, UTC."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return f"{text}T00:00:00Z"
    return text


def _idle_argument(text: str) -> timedelta:
    """``--idle``: ``90d`` or ``12h``."""
    match = re.fullmatch(r"(\d+)([dh])", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a number of days or hours (90d, 12h): {text!r}")
    number = int(match[1])
    return timedelta(days=number) if match[2] == "d" else timedelta(hours=number)


def _command(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser,
    name: str,
    run: Command,
    summary: str,
    *examples: str,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        parents=[common],
        help=summary,
        description=summary,
        epilog="example:\n" + "\n".join(f"  {example}" for example in examples),
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
        "--db", metavar="TARGET", default=os.environ.get(DB_ENV) or DEFAULT_DB, help=_DB_HELP
    )
    # --db may also follow the command; SUPPRESS keeps the value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="TARGET", default=argparse.SUPPRESS, help=_DB_HELP)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    migrate_ = _command(
        commands,
        common,
        "migrate",
        _migrate,
        "upgrade a SQL database's schema to the newest revision",
        "sessionstore migrate --db sqlite:///sessions.db",
        "sessionstore migrate --status --db postgresql://agent@db.internal/sessions",
    )
    migrate_.add_argument(
        "--status", action="store_true", help="show the revision only (changes nothing)"
    )
    ls = _command(
        commands,
        common,
        "ls",
        _ls,
        "list sessions: id, created, entries, last entry, compacted, parent; marks corrupt ones",
        "sessionstore ls --db sessions.db",
        "sessionstore ls --tree",
    )
    ls.add_argument(
        "--tree", action="store_true", help="draw the forks under their parents, with the heads"
    )
    fork = _command(
        commands,
        common,
        "fork",
        _fork,
        "branch a session: a new one holding its history up to an entry; prints the new id",
        "sessionstore fork 3f2b9c1e-0000-4000-8000-000000000000 --at 9d1c-entry --head chat-42",
    )
    fork.add_argument("source", help="the session to branch from")
    fork.add_argument(
        "--at", metavar="ENTRY", help="the id of the last entry to keep (default: all)"
    )
    fork.add_argument("--id", metavar="ID", help="the new session's id (default: a new UUID)")
    fork.add_argument("--head", metavar="NAME", help="then point the head NAME at the new session")
    head = _command(
        commands,
        common,
        "head",
        _head,
        "show where a named head stands and every place it stood (or list the heads)",
        "sessionstore head chat-42",
        "sessionstore head chat-42 --set 3f2b9c1e-0000-4000-8000-000000000000",
    )
    head.add_argument("name", nargs="?", help="the head (default: list every head)")
    head.add_argument("--set", metavar="ID", help="first move the head to session ID")
    show = _command(
        commands,
        common,
        "show",
        _show,
        "show a session's entries, as they are read (Ctrl-C stops)",
        "sessionstore show 3f2b9c1e-0000-4000-8000-000000000000 --tail 20",
        "sessionstore show 3f2b9c1e-0000-4000-8000-000000000000 --json > session.jsonl",
        "sessionstore show 3f2b9c1e-0000-4000-8000-000000000000 --context --check openai",
    )
    show.add_argument("id", help="the session id (as `sessionstore ls` lists it)")
    view = show.add_mutually_exclusive_group()
    view.add_argument("--context", action="store_true", help="the context built for the model")
    show.add_argument(
        "--check",
        choices=["openai", "anthropic", "openai-agents"],
        help="with --context: name each tool call or result that lost its pair (exit 1)",
    )
    view.add_argument(
        "--json", action="store_true", help="the stored lines, verbatim, header first (pipeable)"
    )
    some = show.add_mutually_exclusive_group()
    some.add_argument(
        "--limit", type=_count_argument, metavar="N", help="only the first N entries (or messages)"
    )
    some.add_argument(
        "--tail", type=_count_argument, metavar="N", help="only the last N entries (or messages)"
    )
    imported = _command(
        commands,
        common,
        "import",
        _import,
        "import a JSONL archive (sessions/, journals/, heads/); importing twice adds nothing",
        "sessionstore import ./archive --db sessions.db",
    )
    imported.add_argument("path", help="the archive directory")
    exported = _command(
        commands,
        common,
        "export",
        _export,
        "export sessions, journals and heads as a JSONL archive (incremental)",
        "sessionstore export ./archive --session 3f2b9c1e-0000-4000-8000-000000000000",
        "sessionstore export ./archive --html   # and archive/html/<id>.html to read",
    )
    exported.add_argument("dir", help="the archive directory: new, empty, or an archive to extend")
    exported.add_argument(
        "--session", action="append", metavar="ID", help="export only this session (repeatable)"
    )
    exported.add_argument(
        "--html",
        action="store_true",
        help=f"also write DIR/{HTML}/<id>.html, a readable page per session (import ignores it)",
    )
    page = _command(
        commands,
        common,
        "html",
        _html,
        "write a session as one self-contained HTML page (no script, no fetch)",
        "sessionstore html 3f2b9c1e-0000-4000-8000-000000000000 --out session.html",
    )
    page.add_argument("id", help="the session id (as `sessionstore ls` lists it)")
    page.add_argument("--out", metavar="FILE", help="write the page to FILE (default: stdout)")
    retired = _command(
        commands,
        common,
        "retire",
        _retire,
        "move old sessions into an archive, checked byte for byte, then erase them from the store",
        "sessionstore retire --to ./archive --idle 90d",
        "sessionstore retire --to ./archive --before 2026-01-01 --db sessions.db",
    )
    retired.add_argument(
        "--to", required=True, metavar="DIR", help="the archive: new, empty, or one to extend"
    )
    retired.add_argument(
        "--before",
        type=_date_argument,
        metavar="DATE",
        help="only sessions created before DATE (RFC 3339, or YYYY-MM-DD: midnight UTC)",
    )
    retired.add_argument(
        "--idle",
        type=_idle_argument,
        metavar="AGE",
        help="only sessions with no entry for AGE: Nd days or Nh hours (90d)",
    )
    retired.add_argument(
        "--session", action="append", metavar="ID", help="only this session (repeatable)"
    )
    _command(
        commands,
        common,
        "verify",
        _verify,
        "check every line decodes, seq has no gap, compaction targets exist, integrity",
        "sessionstore verify --db sessions.db",
    )
    erase = _command(
        commands,
        common,
        "erase",
        _erase,
        "remove a whole session for good, leaving a record (when, why, a digest; no content)",
        "sessionstore erase 3f2b9c1e-0000-4000-8000-000000000000 --reason 'user request #812'",
        "sessionstore erase chat-7 --reason 'retention: 90 days' --yes",
    )
    erase.add_argument("id", help="the session id (as `sessionstore ls` lists it)")
    erase.add_argument("--reason", required=True, metavar="TEXT", help="why: kept in the record")
    erase.add_argument(
        "--yes", action="store_true", help="do not ask (needed when stdin is not a terminal)"
    )
    _command(
        commands,
        common,
        "erasures",
        _erasures,
        "list the records of erased sessions and journals: kind, name, at, reason, lines, digest",
        "sessionstore erasures --db ./sessions",
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


# ---------------------------------------------------------------- running


class _DaemonThreads(concurrent.futures.ThreadPoolExecutor):
    """The event loop's executor (``asyncio.to_thread``): daemon threads.

    A Ctrl-C must not wait for a blocking call in flight (a long session's
    load) to finish: asyncio's own executor is joined when the loop closes
    and again when Python exits. These threads are left to die with the
    process; every call they run is awaited before a command succeeds.
    """

    def __init__(self, threads: int = 4) -> None:
        super().__init__(max_workers=threads)
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._started = 0
        self._size = threads
        self._start_lock = threading.Lock()

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._calls.put(call)
        with self._start_lock:
            if self._started < self._size:
                self._started += 1
                threading.Thread(target=self._work, name="sessionstore-io", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            self._calls.get()()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: see the class."""


async def _guarded(run: Command, args: argparse.Namespace) -> int:
    asyncio.get_running_loop().set_default_executor(_DaemonThreads())
    try:
        return await run(args)
    except KeyboardInterrupt:  # raised in the command's own code: end it here
        return INTERRUPTED


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt wherever the command is (a blocked
    write, a long render), not only once the event loop gets control again;
    a second Ctrl-C, during the clean-up, ends the process at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = 0

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal pressed
        pressed += 1
        if pressed > 1:  # die of the signal, as Unix tools do (the shell says 130)
            os.write(2, b"sessionstore: interrupted\n")
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _silence_stdout() -> None:
    """Drop what is left to write to stdout: its reader left, or we were
    interrupted, and a final flush must neither fail nor wait."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a test's capture): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class _Warnings(logging.Handler):
    """The library's logged warnings (a session file skipped...), as
    ``warning: ...`` lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        _warn(record.getMessage())


def _one_line(error: BaseException) -> str:
    return "; ".join(part.strip() for part in str(error).splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    run: Command = args.run
    library = logging.getLogger("sessionstore")
    handler = _Warnings(logging.WARNING)
    library.addHandler(handler)
    try:
        with _interruptible():
            status = asyncio.run(_guarded(run, args))
        if status == INTERRUPTED:
            raise KeyboardInterrupt
        return status
    except KeyboardInterrupt:
        _silence_stdout()
        _err.print("sessionstore: interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()  # like any Unix tool whose reader left (`| head`): quietly
        return BROKEN_PIPE
    except (_Refused, SessionStoreError) as exc:
        _err.print(Text(f"sessionstore: error: {_one_line(exc)}"))
    except OSError as exc:
        _err.print(Text(f"sessionstore: error: {exc}"))
    finally:
        library.removeHandler(handler)
    return 1


if __name__ == "__main__":
    sys.exit(main())
