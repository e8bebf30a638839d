"""Retention policies on the command line: ``expire``, and ``retire`` given a
policy's options (`sessionstore.retention`); ``--dry-run`` shows the plan."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.text import Text

from sessionstore.cli.archives import _check_export_directory
from sessionstore.cli.archives import run_retire as run_plain_retire
from sessionstore.cli.opening import opened
from sessionstore.cli.output import (
    Refused,
    counted,
    err_console,
    escaped,
    moment,
    progress_bar,
    size,
    table,
)
from sessionstore.cli.policy_options import POLICY_OPTIONS
from sessionstore.cli.wording import in_user_words, named
from sessionstore.errors import ConfigurationError
from sessionstore.retention import Left, Plan, Policy, RetentionReport, apply

__all__ = ["run_expire", "run_retire"]

_COLUMNS = ("session", "owner", "created", "last entry", "entries", "bytes", "reason")


def _policy(args: argparse.Namespace, action: str) -> Policy:
    """The policy the options give."""
    try:
        return Policy(
            action="retire" if action == "retire" else "expire",
            to=getattr(args, "to", None),
            idle_for=args.idle,
            created_before=args.before,
            owner=args.owner,
            tags=args.tag or (),
            keep_newest=args.keep_newest,
            reason=getattr(args, "reason", None),
        )
    except ConfigurationError as exc:
        flags = str(exc)
        for field, flag in (
            ("idle_for=", "--idle"),
            ("created_before=", "--created-before"),
            ("keep_newest=", "--keep-newest"),
            ("tags=", "--tag"),
            ("owner=", "--owner"),
            ("reason=", "--reason"),
        ):
            flags = flags.replace(field, flag)
        raise Refused(flags) from None


def _shown(plan: Plan, verb: str, args: argparse.Namespace) -> None:
    """The plan: a table of what would go (TSV when piped), the sessions left
    (on stderr), and a total."""
    rows = [
        (
            going.session_id,
            going.owner or "-",
            moment(going.created_at),
            moment(going.last_activity),
            going.entries,
            going.bytes,
            going.reason,
        )
        for going in plan.going
    ]
    if rows:
        title = f"{verb}: {plan.policy.describe()}"
        table(title, _COLUMNS, rows, whole=("session",), right=("entries", "bytes"))
    _left(plan.left, args)
    print(
        f"would {verb} {counted(len(plan.going), 'session')} of {plan.held} "
        f"({counted(plan.entries, 'entry', 'entries')}, {size(plan.bytes)}); "
        f"left {len(plan.left)}"
    )


def _left(left: Sequence[Left], args: argparse.Namespace) -> None:
    for issue in left:
        label = "fault: left" if issue.fault else "left"
        err_console.print(Text(f"{label} {escaped(in_user_words(str(issue), args))}"))


def _done(report: RetentionReport, verb: str, args: argparse.Namespace) -> int:
    """What a run did, line by line, then a total; 1 when a session was left for a fault."""
    past = f"{verb}d"  # expired, retired
    for going in report.gone:
        print(f"{past} {escaped(going.session_id)}")
    _left(report.left, args)
    where = f" to {escaped(report.archive)}" if report.archive else ""
    print(
        f"{past} {counted(len(report.gone), 'session')} ({size(report.bytes)}){where}; "
        f"already gone {len(report.already_gone)}; left {len(report.left)}"
    )
    faults = sum(left.fault for left in report.left)
    if faults:
        raise Refused(f"{counted(faults, 'session')} left with a fault (listed above)")
    return 0


async def _run(args: argparse.Namespace, verb: str) -> int:
    policy = _policy(args, verb)
    # An expire asks unless --yes; a retire (which keeps a checked copy), as the
    # plain one does, only when it would take every session.
    asks = not args.dry_run and not args.yes
    if asks and verb == "expire" and not sys.stdin.isatty():
        raise Refused("expire asks on a terminal first; pass --yes to expire from a script")
    if policy.to is not None:
        _check_export_directory(Path(policy.to), "retire")
    declined = False

    async def confirm(plan: Plan) -> bool:
        nonlocal declined
        if args.dry_run:
            _shown(plan, verb, args)
            return False
        if not asks or (verb == "retire" and len(plan.going) < plan.held):
            return True
        if not sys.stdin.isatty():  # a retire of everything
            raise Refused(
                f"retire would take every session of {named(args.db)} ({len(plan.going)}): "
                "it asks on a terminal first; pass --yes to retire them all from a script"
            )
        _shown(plan, verb, args)
        question = (
            f"{verb} {counted(len(plan.going), 'session')} ({size(plan.bytes)}) "
            f"of {named(args.db)}{' for good' if verb == 'expire' else ''}? [y/N] "
        )
        err_console.print(Text(escaped(question)), end="")
        answer = await asyncio.to_thread(sys.stdin.readline)  # Ctrl-C stops it
        declined = answer.strip().lower() != "y"
        return not declined

    acted = (0, 0)  # sessions acted on, of how many
    with contextlib.ExitStack() as shown:
        bar: Callable[[int, int], None] | None = None

        def progress(done: int, total: int) -> None:
            # The bar starts with the first act, after any question is answered.
            nonlocal bar, acted
            acted = (done, total)
            if bar is None:
                bar = shown.enter_context(progress_bar(f"{verb[:-1]}ing"))
            bar(done, total)

        try:
            async with opened(args, read=True) as store:
                report = await apply(store, policy, confirm=confirm, progress=progress)
        except (KeyboardInterrupt, asyncio.CancelledError):
            if acted[1]:
                done, total = acted
                err_console.print(
                    f"{verb}d at least {done} of {counted(total, 'session')} before the "
                    "interrupt, each whole; the same command again finishes the rest"
                )
            raise
    if args.dry_run:
        if not report.plan.going:
            _shown(report.plan, verb, args)
        return 0
    if declined:
        left = counted(len(report.plan.going), "session")
        raise Refused(f"not confirmed: {left} left as they are")
    return _done(report, verb, args)


async def run_expire(args: argparse.Namespace) -> int:
    return await _run(args, "expire")


async def run_retire(args: argparse.Namespace) -> int:
    # Given, not truthy: ``--owner ''`` is a policy option (refused as one), never
    # dropped into a plain retire of every owner's sessions.
    given = [getattr(args, option) for option in POLICY_OPTIONS]
    if all(value is None or value is False for value in given):
        return await run_plain_retire(args)  # its first options alone: as it always ran
    if args.session:
        raise Refused("--session names the sessions to retire: it takes no policy option")
    return await _run(args, "retire")
