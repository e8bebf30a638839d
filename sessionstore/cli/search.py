"""``search``: the messages that say every word, best first, a page at a time."""

from __future__ import annotations

import argparse

from rich.text import Text

from sessionstore.backends.words import words
from sessionstore.cli.browse import next_page
from sessionstore.cli.defaults import HITS
from sessionstore.cli.opening import opened
from sessionstore.cli.output import (
    Refused,
    cell,
    console,
    counted,
    err_console,
    escaped,
    marked,
    tsv,
)
from sessionstore.store import SearchHit
from sessionstore.wire import encode_value

__all__ = ["NO_MATCH", "run_search"]

NO_MATCH = 1
"""The status of a search that found nothing, as grep's: a script can test it."""


async def run_search(args: argparse.Namespace) -> int:
    text = " ".join(args.words)
    if not words(text):
        raise Refused(f"{text!r} holds no word to search for (words are letters and digits)")
    async with opened(args, read=True) as store:
        hits = await store.search(text, owner=args.owner, limit=args.limit, after=args.after)
    if not hits:
        if args.after is not None:
            said = "no more hits after that cursor"
        else:
            said = f"no message says {'every word of ' if len(words(text)) > 1 else ''}{text!r}"
        if args.owner is not None:
            said += f" in the sessions of {args.owner!r}"
        err_console.print(Text(escaped(said)))
        return NO_MATCH
    if args.json:
        for hit in hits:
            print(_json(hit))
    elif console.is_terminal:
        _hits_on_terminal(hits)
    else:
        tsv(("session", "seq", "role", "snippet", "entry"))
        for hit in hits:
            tsv((hit.session_id, hit.seq, hit.role, hit.snippet, hit.entry_id))
    shown = counted(len(hits), "hit")
    if len(hits) == args.limit:
        command = ["search", *args.words]
        if args.owner is not None:
            command += ["--owner", args.owner]
        if args.limit != HITS:
            command += ["--limit", str(args.limit)]
        next_page(args, command, hits[-1].cursor, shown=shown)
    elif console.is_terminal and not args.json:
        console.print(Text(shown, style="dim"))
    return 0


def _hits_on_terminal(hits: list[SearchHit]) -> None:
    """Two lines a hit: where (session id, ``#seq``, role, entry id), then the
    snippet, its matched words in bold, indented and folded to the terminal."""
    for hit in hits:
        where = Text(" ").append(cell(hit.session_id), style="bold")
        where.append(f"  #{hit.seq}  {cell(hit.role)}  ")
        where.append(cell(hit.entry_id), style="dim")
        console.print(where)
        for line in marked(hit.snippet, hit.highlights).wrap(console, console.width - 4):
            console.print(Text("    ").append_text(line))


def _json(hit: SearchHit) -> str:
    """A hit as one JSON object on one line (``search --json``)."""
    return encode_value(
        {
            "session_id": hit.session_id,
            "entry_id": hit.entry_id,
            "seq": hit.seq,
            "role": hit.role,
            "snippet": hit.snippet,
            "highlights": [list(span) for span in hit.highlights],
            "cursor": hit.cursor,
        }
    )
