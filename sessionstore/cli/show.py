"""One session: ``show`` (its entries, its context, its stored lines, as they are
read), ``html`` (one self-contained page, written as it is read), ``title``."""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar

from rich.text import Text

from sessionstore.backends.records import current_title, decode_stored_entry, decode_stored_meta
from sessionstore.cli.naming import session_named
from sessionstore.cli.opening import opened
from sessionstore.cli.output import (
    Refused,
    cell,
    console,
    counted,
    err_console,
    escaped,
    literal,
    moment,
    preview,
    tsv,
)
from sessionstore.cli.rows import ToolNames, compaction_text, message_line
from sessionstore.context import check_pairing
from sessionstore.errors import SessionNotFoundError
from sessionstore.models import MessageEntry, SessionEntry, SessionMeta
from sessionstore.store import SessionStore

__all__ = ["run_html", "run_show", "run_title", "session_header", "session_title"]

_T = TypeVar("_T")


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
        number += 1
        yield number, item
        if number == limit:  # before asking for one more: it may not decode
            return


class _EntryLines:
    """``show``'s rows, written as they come: a grid on a terminal, one
    tab-separated line per entry when piped."""

    def __init__(self) -> None:
        self.terminal = console.is_terminal
        self.width = console.width
        self.rows = 0
        self.names = ToolNames()  # a result names the tool of a call shown before it

    def header(self, session_id: str, title: str | None) -> None:
        if self.terminal:
            head = Text(f"session {cell(session_id)}", style="bold")
            console.print(head if title is None else head.append(f" — {cell(title)}"))
            console.print(self._line("#", "id", "type", "role", "timestamp", "text", bold=True))
        else:
            tsv(("#", "type", "timestamp", "role", "text", "id"))

    def row(self, number: int, entry: SessionEntry) -> None:
        if isinstance(entry, MessageEntry):
            label, text = message_line(entry.message, self.names)
        else:
            label, text = "-", compaction_text(entry)
        if self.terminal:
            console.print(
                self._line(str(number), entry.id, entry.type, label, moment(entry.timestamp), text)
            )
        else:
            # A script reads the role as stored; the text says what the tools did.
            role = entry.message.role if isinstance(entry, MessageEntry) else "-"
            tsv((number, entry.type, entry.timestamp, role, preview(text), entry.id))
            if self.rows % 1000 == 0:
                sys.stdout.flush()  # the first line at once, then in large writes
        self.rows += 1

    def _line(
        self,
        number: str,
        entry_id: str,
        kind: str,
        label: str,
        timestamp: str,
        text: str,
        *,
        bold: bool = False,
    ) -> Text:
        """One entry, its text on a second line when it has no room beside the rest;
        then its id, whole (`fork --at` takes it), on a line of its own."""
        head = f"{number:>7}  {cell(kind):<10}  {preview(label, 11):<11}  {cell(timestamp):<19}"
        room = self.width - len(head) - 2
        line = Text(head if room >= 40 else head.rstrip(), style="bold" if bold else "")
        if room >= 40:
            line.append("  " + preview(text, room))
        elif not bold:
            line.append("\n" + " " * 9 + preview(text, self.width - 9))
        line.append("\n" + " " * 9 + cell(entry_id), style="bold dim" if bold else "dim")
        return line

    def footer(self, total: str) -> None:
        if self.terminal:
            console.print(Text(total, style="dim"))


async def run_show(args: argparse.Namespace) -> int:
    limit, tail = args.limit, args.tail
    if args.check is not None and not args.context:
        raise Refused("--check looks at the context: give --context too")
    async with opened(args, read=True) as store:
        args.id = await session_named(store, args.id, exact=args.exact)
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
            names = ToolNames()  # read from the first: a result shown names an earlier call
            said = [message_line(message, names) for message in messages]
            shown = said[len(said) - tail :] if tail is not None else said[:limit]
            for label, text in shown:
                if console.is_terminal:
                    head = Text(f"{cell(label)}: ", style="bold")
                    console.print(head.append(literal(text)))
                else:
                    print(f"{cell(label)}: {literal(text)}")
            for orphan in orphans:
                err_console.print(Text(f"orphan: {escaped(str(orphan))}"))
            if orphans:
                raise Refused(
                    f"the context of {args.id} has {counted(len(orphans), 'orphan')} "
                    f"a model API would refuse ({args.check}); `load_context(..., repair=...)` "
                    "gives one it takes"
                )
            return 0
        out = _EntryLines()
        if tail is not None:
            last = await _last_entries(store, args.id, tail)
            out.header(args.id, await session_title(store, args.id) if out.terminal else None)
            for number, entry in last:
                out.row(number, entry)
        else:
            stream = store.iter_entries(args.id)
            try:
                numbered = _numbered(stream, limit=limit, tail=None)
                first = await anext(numbered, None)  # a missing session raises here
                title = await session_title(store, args.id) if out.terminal else None
                out.header(args.id, title)
                if first is not None:
                    out.row(*first)
                async for number, entry in numbered:
                    out.row(number, entry)
            finally:
                await stream.aclose()
    out.footer(counted(out.rows, "entry", "entries") + " shown")
    return 0


async def _last_entries(
    store: SessionStore, session_id: str, tail: int
) -> list[tuple[int, SessionEntry]]:
    """The last ``tail`` entries, numbered by their place in the session.

    Every stored line is read, but only the last ``tail`` are decoded: the
    decoding, not the reading, is what a long session costs (a million
    entries: 4 to 5 s through `iter_entries`, under 1 s so, JSONL or SQLite).
    """
    lines = store.raw_lines(session_id)
    kept: collections.deque[tuple[int, str]] = collections.deque(maxlen=tail)
    try:
        async for header in lines:
            decode_stored_meta(session_id, header, path=None, line_no=1)
            break
        number = 0
        async for line in lines:
            number += 1
            kept.append((number, line))
    finally:
        if isinstance(lines, AsyncGenerator):  # close the file or cursor now
            await lines.aclose()
    return [
        (number, decode_stored_entry(session_id, line, path=None, line_no=number + 1))
        for number, line in kept
    ]


async def run_html(args: argparse.Namespace) -> int:
    from sessionstore.transcript import render_html, write_html  # for this command only

    async with opened(args, read=True) as store:
        args.id = await session_named(store, args.id, exact=args.exact)
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
    print(f"wrote the page of session {escaped(args.id)} to {escaped(args.out)}")
    return 0


async def session_header(store: SessionStore, session_id: str) -> SessionMeta:
    """A session's header, from its first stored line (not a listing of every session).

    Raises:
        SessionNotFoundError: no such session.
        CorruptSessionError: its header does not decode.
    """
    lines = store.raw_lines(session_id)
    try:
        async for line in lines:
            return decode_stored_meta(session_id, line, path=None, line_no=1)
    finally:
        if isinstance(lines, AsyncGenerator):  # close the file or cursor now
            await lines.aclose()
    raise SessionNotFoundError(session_id)  # a store gives the header first, always


async def session_title(store: SessionStore, session_id: str) -> str | None:
    """A session's title now (the last `set_title`, else its header's), as `summaries` gives it."""
    changes = await store.titles(session_id)
    return current_title(await session_header(store, session_id), changes)


async def run_title(args: argparse.Namespace) -> int:
    if args.clear and args.text is not None:
        raise Refused("give a TEXT or --clear, not both")
    if args.text is not None and not args.text.strip():
        raise Refused("a title needs some text (--clear goes back to the header's title)")
    async with opened(args, read=True) as store:
        args.id = await session_named(store, args.id, exact=args.exact)
        if args.clear or args.text is not None:
            await store.set_title(args.id, None if args.clear else args.text)
        meta = await session_header(store, args.id)
        changes = await store.titles(args.id)
    now = current_title(meta, changes)
    if args.clear or args.text is not None:
        print(f"{escaped(args.id)}: {_shown(now)}")
        return 0
    # The title each step left the session with: the header's first.
    rows: list[tuple[str, str, str | None]] = [(meta.created_at, "header", meta.title)]
    rows += [
        (c.at, "set" if c.title is not None else "cleared", current_title(meta, changes[: n + 1]))
        for n, c in enumerate(changes)
    ]
    if not console.is_terminal:
        tsv(("at", "change", "title"))
        for at, change, title in rows:
            tsv((at, change, title or ""))
        return 0
    console.print(Text(f"titles of session {cell(args.id)}", style="bold"))
    stamp = max(len(moment(at)) for at, _, _ in rows)
    for at, change, title in rows:
        line = Text(f" {moment(at):<{stamp}}  {change:<7}  ", style="dim")
        console.print(line.append(_shown(title), style="" if title else "dim"))
    console.print(Text(f"title now: {_shown(now)}", style="bold"))
    return 0


def _shown(title: str | None) -> str:
    return cell(title) if title else "(none)"
