"""``title``: give a session a title, take it back, or show every title it had."""

from __future__ import annotations

import argparse
from collections.abc import AsyncGenerator

from rich.text import Text

from sessionstore.backends.records import current_title, decode_stored_meta
from sessionstore.cli.naming import session_named
from sessionstore.cli.opening import opened
from sessionstore.cli.output import Refused, cell, console, escaped, moment, tsv
from sessionstore.errors import SessionNotFoundError
from sessionstore.models import SessionMeta
from sessionstore.store import SessionStore

__all__ = ["run_title", "session_header", "session_title"]


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
