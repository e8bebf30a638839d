"""Finding sessions: ``ls`` (a page of sessions, or the tree of forks)."""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence

from rich.text import Text

from sessionstore.cli.opening import opened
from sessionstore.cli.output import cell, console, counted, tsv, warn
from sessionstore.store import SessionStore, SessionSummary

__all__ = ["run_ls"]


async def run_ls(args: argparse.Namespace) -> int:
    async with opened(args, read=True) as store:
        summaries = sorted(await store.summaries(), key=lambda s: (s.meta.created_at, s.meta.id))
        heads = await _heads_by_session(store) if args.tree else {}
    faulty = [s for s in summaries if s.fault is not None]
    for summary in faulty:
        warn(f"{summary.fault}")
    if args.tree:
        for line in _tree(summaries, heads):
            console.print(line) if console.is_terminal else print(line.plain)
    elif console.is_terminal:
        _sessions_on_terminal(summaries)
    else:
        tsv(("id", "created", "entries", "last entry", "compacted", "fault", "parent"))
        for s in summaries:
            fault = "-" if s.fault is None else "corrupt"
            compacted = "yes" if s.compacted else "no"
            created, last = s.meta.created_at or "-", s.last_timestamp or "-"
            parent = s.meta.parent_session or "-"
            tsv((s.meta.id, created, s.entries, last, compacted, fault, parent))
    if faulty:
        warn(
            f"{counted(len(faulty), 'session')} marked corrupt: its data does not decode "
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


def _sessions_on_terminal(summaries: Sequence[SessionSummary]) -> None:
    """``ls`` on a terminal: a table when it fits, else two lines a session.

    An id is never cut nor folded by us: it is what one copies into
    ``show``, and a line longer than the terminal is wrapped by the
    terminal itself, which copies it back as one line.
    """
    # Ids too long for the terminal widen their own line only.
    fits = [len(s.meta.id) for s in summaries if len(s.meta.id) + 22 <= console.width]
    width = max(fits, default=2)
    stamp = max((len(cell(s.meta.created_at or "-")) for s in summaries), default=7)
    last = max((len(cell(s.last_timestamp or "-")) for s in summaries), default=10)
    one_line = width + stamp + last + 7 + 9 + 7 * 2 <= console.width

    def head(id_: str, entries: str, compacted: str, fault: str, style: str = "") -> Text:
        line = Text(f" {id_:<{width}}  {entries:>7}  {compacted:<9}", style=style)
        if fault:
            line.append(f"  {fault}", style=style or "bold red")
        return line

    console.print(Text("sessions", style="bold"))
    if one_line:
        columns = f"  {'created':<{stamp}}  {'last entry':<{last}}"
        console.print(head("id", "entries", "compacted", "", "bold").append(columns, style="bold"))
    else:
        console.print(head("id", "entries", "compacted", "", "bold"))
        console.print(Text("   created → last entry", style="bold"))
    for s in summaries:
        compacted = "yes" if s.compacted else "no"
        line = head(s.meta.id, str(s.entries), compacted, "corrupt" if s.fault else "")
        times = (cell(s.meta.created_at or "-"), cell(s.last_timestamp or "-"))
        if one_line and not s.fault:
            line.append(f"  {times[0]:<{stamp}}  {times[1]:<{last}}")
        else:
            line.append(f"\n   {times[0]} → {times[1]}")
        console.print(line)
    console.print(Text(counted(len(summaries), "session"), style="dim"))
