"""``vacuum``: give the disk back after erasures (docs/sql.md, Vacuum), printing
the store's size before and after."""

from __future__ import annotations

import argparse

from sessionstore.backends.space import vacuum
from sessionstore.cli.opening import check_store
from sessionstore.cli.output import escaped, progress_bar, size, warn
from sessionstore.cli.wording import named

__all__ = ["run_vacuum"]


async def run_vacuum(args: argparse.Namespace) -> int:
    await check_store(args.db, read=True)
    with progress_bar("vacuum") as progress:
        report = await vacuum(
            args.db, convert=not args.no_convert, full=args.full, progress=progress
        )
    where = escaped(named(args.db))
    if report.kind in ("jsonl", "memory") and not report.given_back:
        print(f"{where}: nothing to give back ({report.notes[0]})")
        return 0
    what = f"{size(report.bytes_before)} -> {size(report.bytes_after)}"
    print(f"{where}: gave back {size(report.given_back)} ({what})")
    if report.kind == "jsonl":
        print("  removed the index of ids an earlier version kept (.ids/), which nothing reads")
        return 0
    if report.kind == "sqlite":
        steps = f"{report.pages_freed:,} pages in {report.chunks:,} steps"
        if report.converted:
            steps = f"converted to incremental auto_vacuum by a full VACUUM, then {steps}"
        elif report.full:
            steps = "a full VACUUM"
        print(f"  {steps}; the longest held writers off {report.longest_step * 1000:.0f} ms")
    else:
        done = "tables rewritten" if not report.skipped else "not every table rewritten"
        print(f"  {done}; the longest held its lock {report.longest_step:.1f} s")
    for note in report.notes:
        warn(note)
    return 0 if report.complete else 1
