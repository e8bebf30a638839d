"""``sessionstore effects``: the effects an operator must look at, across every
journal (in doubt, dead-lettered), and the prune of old finished ones
(docs/effects.md, "After a crash: the operator's runbook")."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from rich.text import Text

from sessionstore.cli.defaults import login
from sessionstore.cli.opening import opened
from sessionstore.cli.output import Refused, counted, err_console, escaped, moment, records
from sessionstore.cli.wording import settle_hint
from sessionstore.effect_journals import JournalEffect, effects_in_doubt, forget_effects
from sessionstore.effect_lines import EffectState
from sessionstore.effect_options import finished_before, line_instant
from sessionstore.timestamps import age_in_words
from sessionstore.wire import encode_value

__all__ = ["run_effects"]


async def run_effects(args: argparse.Namespace) -> int:
    if args.forget_before is not None:
        return await _forget(args)
    if args.reason is not None or args.yes or args.by is not None:
        raise Refused("--reason, --by and --yes go with --forget-before DATE")
    async with opened(args, read=True) as store:
        found = await effects_in_doubt(store)
        journals = len(await store.journals())
    now = datetime.now(UTC)
    if args.json:
        for item in found:
            print(_json(item, now))
        return 1 if found else 0
    columns = ("journal", "key", "state", "tool", "session", "age", "attempts", "found", "started")
    rows = [
        (
            item.journal,
            s.key,
            s.state,
            s.tool or "-",
            s.session or "-",
            _age(s.started, now),
            s.attempts,
            s.found,
            moment(s.started or ""),
        )
        for item in found
        for s in [item.effect]
    ]
    records("effects in doubt or dead-lettered", columns, rows, head="key")
    dead = sum(1 for item in found if item.effect.state == "dead letter")
    print(
        f"{counted(len(found) - dead, 'effect')} in doubt, {dead} dead-lettered, "
        f"in {counted(journals, 'journal')}"
    )
    if found:
        err_console.print(Text(f"make sure no process still runs them; {settle_hint(args.db)}"))
    return 1 if found else 0


def _json(item: JournalEffect, now: datetime) -> str:
    s = item.effect
    started = line_instant(s.started or "")
    return encode_value(
        {
            "journal": item.journal,
            "key": s.key,
            "state": s.state,
            "tool": s.tool,
            "session": s.session,
            "args": s.args,
            "started": s.started,
            "age_seconds": None if started is None else round((now - started).total_seconds()),
            "attempts": s.attempts,
            "found": s.found,
            "last": s.last,
        }
    )


def _age(stamp: str | None, now: datetime) -> str:
    """How long ago ``stamp`` was: ``3d 4h``, ``2h 5m``, ``40s`` ("-": unknown)."""
    then = line_instant(stamp or "")
    return "-" if then is None else age_in_words(now - then)


async def _forget(args: argparse.Namespace) -> int:
    """List the effects finished before the date; with --yes, forget them, recorded."""
    cutoff = args.forget_before  # a Timestamp: the parser refused any other
    if args.yes and (args.reason is None or not args.reason.strip()):
        raise Refused("--forget-before DATE --yes needs --reason TEXT: why they may go (recorded)")
    async with opened(args, read=not args.yes) as store:
        old: list[tuple[str, EffectState]] = []
        for name in sorted(await store.journals()):
            effects = await store.journal(name).effects.read()
            old += [(name, s) for s in effects if finished_before(s, cutoff)]
        if args.yes:
            by = args.by or login()
            lines = await forget_effects(store, cutoff, reason=args.reason, by=by)
            forgotten = {(name, line.key) for name, made in lines.items() for line in made}
            old = [(name, s) for name, s in old if (name, s.key) in forgotten]
    done = sum(1 for _, s in old if s.state == "done")
    if args.json:
        for name, s in old:
            print(_finished_json(name, s, forgotten=args.yes))
    else:
        columns = ("journal", "key", "state", "tool", "session", "finished")
        rows = [
            (name, s.key, s.state, s.tool or "-", s.session or "-", moment(s.finished or ""))
            for name, s in old
        ]
        verb = "forgotten" if args.yes else "to forget"
        records(f"effects finished before {args.forget_before}: {verb}", columns, rows, head="key")
        if args.yes:
            said = f" by {by}" if by else ""
            print(escaped(f"forgot {counted(len(old), 'effect')}{said}; reason: {args.reason}"))
        else:
            given = args.reason is not None and args.reason.strip()
            missing = "--yes" if given else "--yes --reason TEXT"
            print(f"{counted(len(old), 'effect')} would be forgotten; add {missing} to do it")
    if done:
        err_console.print(
            Text(
                f"{counted(done, 'done effect')}: a forgotten key runs afresh, so a replay of "
                "one of these would run it again"
            )
        )
    return 0


def _finished_json(journal: str, s: EffectState, *, forgotten: bool) -> str:
    """A finished effect that ``--forget-before`` lists, or forgot, as one JSON line."""
    return encode_value(
        {
            "journal": journal,
            "key": s.key,
            "state": s.state,
            "tool": s.tool,
            "session": s.session,
            "finished": s.finished,
            "forgotten": forgotten,
        }
    )
