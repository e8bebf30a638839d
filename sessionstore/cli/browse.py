"""Browsing sessions: ``ls``, a page of them newest first, or the tree of forks."""

from __future__ import annotations

import argparse
import collections
import shlex
from collections.abc import Sequence

from rich.text import Text

from sessionstore.cli.defaults import PAGE, default_target
from sessionstore.cli.opening import opened
from sessionstore.cli.output import (
    Refused,
    cell,
    console,
    counted,
    err_console,
    escaped,
    moment,
    preview,
    tsv,
    warn,
)
from sessionstore.cli.wording import in_user_words, named
from sessionstore.store import SessionStore, SessionSummary
from sessionstore.wire import encode_value

__all__ = ["next_page", "run_ls"]

_COLUMNS = (
    "id",
    "created",
    "entries",
    "last entry",
    "compacted",
    "fault",
    "parent",
    "last activity",
    "owner",
    "title",
)
_OWNER_WIDTH = 24  # an owner longer than this is cut on a terminal (whole when piped)
_TITLE_WIDTH = 20  # the least room a title needs to share the line with the rest


async def run_ls(args: argparse.Namespace) -> int:
    if args.tree:
        return await _ls_tree(args)
    # A terminal shows a page (a store may hold 100,000 sessions); a pipe gets
    # every one, so that `ls | grep` misses none.
    limit = args.limit if args.limit is not None else PAGE if console.is_terminal else None
    async with opened(args, read=True) as store:
        summaries = await store.summaries(
            owner=args.owner, order=args.order, limit=limit, after=args.after
        )
    _each_fault(summaries, args)
    more = limit is not None and len(summaries) == limit
    if args.json:
        for s in summaries:
            print(_json(s))
    elif console.is_terminal:
        _sessions_on_terminal(summaries, args.order, args.owner)
    else:
        tsv(_COLUMNS)
        for s in summaries:
            tsv(_row(s))
    shown = counted(len(summaries), "session")
    if more:
        command = ["ls", *_order_and_owner(args)]
        if args.limit is not None:
            command += ["--limit", str(args.limit)]
        next_page(args, command, summaries[-1].cursor, shown=shown)
    elif console.is_terminal and not args.json:
        console.print(Text(shown, style="dim"))
    return _faults(summaries)


def next_page(args: argparse.Namespace, command: Sequence[str], cursor: str, *, shown: str) -> None:
    """The command that gets the next page (``--db`` unless the default): dim below
    a listing on a terminal; on stderr when piped or for ``--json`` (stdout: rows only)."""
    db = [] if args.db == default_target() else ["--db", named(args.db)]
    json = ["--json"] if args.json else []
    words = ["sessionstore", *db, *command, *json, "--after", cursor]
    line = escaped(" ".join(map(shlex.quote, words)))
    if console.is_terminal and not args.json:
        console.print(Text(f"{shown} shown; next page: {line}", style="dim"))
    else:
        err_console.print(Text(f"next page: {line}"))


def _order_and_owner(args: argparse.Namespace) -> list[str]:
    words = [] if args.order == "last_activity" else ["--order", args.order]
    return words if args.owner is None else [*words, "--owner", args.owner]


def _each_fault(summaries: Sequence[SessionSummary], args: argparse.Namespace) -> None:
    for summary in summaries:
        if summary.fault is not None:
            warn(in_user_words(summary.fault, args))


def _faults(summaries: Sequence[SessionSummary]) -> int:
    """Warn of how many sessions are corrupt: 1 when there is one, else 0."""
    faulty = sum(s.fault is not None for s in summaries)
    if not faulty:
        return 0
    warn(
        f"{counted(faulty, 'session')} marked corrupt: its data does not decode "
        "(`sessionstore verify` lists every fault)"
    )
    return 1


def _row(s: SessionSummary) -> tuple[object, ...]:
    """A session's tab-separated line: the columns `_COLUMNS` names."""
    return (
        s.meta.id,
        s.meta.created_at or "-",
        s.entries,
        s.last_timestamp or "-",
        "yes" if s.compacted else "no",
        "-" if s.fault is None else "corrupt",
        s.meta.parent_session or "-",
        s.last_activity or "-",
        s.meta.owner or "-",
        s.title or "",
    )


def _json(s: SessionSummary) -> str:
    """A session as one JSON object on one line (``ls --json``)."""
    return encode_value(
        {
            "id": s.meta.id,
            "title": s.title,
            "owner": s.meta.owner,
            "parent": s.meta.parent_session,
            "created": s.meta.created_at,
            "last_activity": s.last_activity or None,
            "entries": s.entries,
            "compacted": s.compacted,
            "fault": s.fault,
            "cursor": s.cursor,
        }
    )


async def _ls_tree(args: argparse.Namespace) -> int:
    """``ls --tree``: every session, so none of the paging options."""
    given = [
        option
        for option, value in (
            ("--limit", args.limit),
            ("--after", args.after),
            ("--owner", args.owner),
            ("--json", args.json or None),
        )
        if value is not None
    ]
    if given:
        raise Refused(f"--tree draws every session of the store: it takes no {', '.join(given)}")
    async with opened(args, read=True) as store:
        found = await store.summaries(order="created", limit=None)
        heads = await _heads_by_session(store)
    summaries = sorted(found, key=lambda s: (s.meta.created_at, s.meta.id))  # oldest first
    _each_fault(summaries, args)
    for line in _tree(summaries, heads):
        console.print(line) if console.is_terminal else print(line.plain)
    return _faults(summaries)


async def _heads_by_session(store: SessionStore) -> dict[str, list[str]]:
    """The names of the heads standing on each session."""
    standing: dict[str, list[str]] = collections.defaultdict(list)
    for name in sorted(await store.heads()):
        session_id = await store.head(name)
        if session_id is not None:
            standing[session_id].append(name)
    return standing


def _tree(summaries: Sequence[SessionSummary], heads: dict[str, list[str]]) -> list[Text]:
    """Sessions as a forest of forks, each under its parent, oldest first; a session
    whose parent is not here, or in a loop of parents (data written by hand), a root."""
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
        line.append(cell(s.meta.id), style="bold" if top else "")
        line.append(f"  {counted(s.entries, 'entry', 'entries')}", style="dim")
        if s.compacted:
            line.append(", compacted", style="dim")
        parent = s.meta.parent_session
        if top and parent is not None:
            line.append(f"  (fork of {cell(parent)}, not in this store)", style="dim")
        for name in heads.get(s.meta.id, ()):
            line.append(f"  <- {cell(name)}", style="bold green")
        if s.fault:
            line.append("  corrupt", style="bold red")
        lines.append(line)
        below = children.get(s.meta.id, [])
        inner = lead + ("" if top else ("   " if branch == "└─ " else "│  "))
        for at, child in reversed(list(enumerate(below))):
            stack.append((child, inner, "└─ " if at == len(below) - 1 else "├─ ", False))
    return lines


def _sessions_on_terminal(
    summaries: Sequence[SessionSummary], order: str, owner: str | None
) -> None:
    """``ls`` on a terminal: a line a session, the title on a second when it has no room.

    An id is never cut nor folded by us (it is copied into ``show``, and the
    terminal's own wrap copies back as one line); titles and owners are cut to fit.
    """
    by_activity = order == "last_activity"
    when = [moment(s.last_activity if by_activity else s.meta.created_at) for s in summaries]
    owners = [preview(s.meta.owner or "-", _OWNER_WIDTH) for s in summaries]
    ids = [cell(s.meta.id) for s in summaries]
    # Ids too long for the terminal widen their own line only.
    fits = [len(id_) for id_ in ids if len(id_) + 40 <= console.width]
    width = max([2, *fits])
    stamp = max([len("last activity" if by_activity else "created"), *map(len, when)])
    owned = max([len("owner"), *map(len, owners)])
    used = 1 + width + 2 + stamp + 2 + 7 + 2 + owned
    one_line = used + 2 + _TITLE_WIDTH <= console.width

    def line(id_: str, at: str, entries: str, owner: str, title: str, style: str = "") -> Text:
        shown = f" {id_:<{width}}  {at:<{stamp}}  {entries:>7}  {owner:<{owned}}"
        if title and one_line:
            shown += "  " + preview(title, console.width - used - 2)
        return Text(shown.rstrip(), style=style)

    heading = "sessions" + ("" if owner is None else f" of {cell(owner)}")
    heading += ", newest activity first" if by_activity else ", newest created first"
    console.print(Text(heading, style="bold"))
    at = "last activity" if by_activity else "created"
    columns = line("id", at, "entries", "owner", "title", "bold")
    console.print(columns if one_line else columns.append("\n   title", style="bold"))
    for s, id_, at, owned_by in zip(summaries, ids, when, owners, strict=True):
        shown = line(id_, at, str(s.entries), owned_by, s.title or "")
        if s.fault:
            shown.append("  corrupt", style="bold red")
        if s.title and not one_line:
            shown.append("\n   " + preview(s.title, console.width - 3))
        console.print(shown)
