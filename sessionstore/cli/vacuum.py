"""``vacuum``: give the disk back after erasures (docs/sql.md, Vacuum), printing
the store's size before and after."""

from __future__ import annotations

import argparse

from sessionstore.backends.space import vacuum
from sessionstore.cli.opening import check_store
from sessionstore.cli.output import escaped, warn
from sessionstore.cli.wording import named

__all__ = ["run_vacuum"]


def _size(count: int) -> str:
    """A byte count as a person reads it: ``812 bytes``, ``3.4 MB``, ``1.02 GB``."""
    if count < 1000:
        return f"{count} bytes"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        if count < scale * 1000 or unit == "TB":
            shown = count / scale
            return f"{shown:.3g} {unit}" if shown < 100 else f"{shown:.0f} {unit}"
    raise AssertionError("unreachable")


async def run_vacuum(args: argparse.Namespace) -> int:
    await check_store(args.db, read=True)
    report = await vacuum(args.db, convert=not args.no_convert)
    where = escaped(named(args.db))
    if report.kind in ("jsonl", "memory"):
        print(f"{where}: nothing to give back ({report.notes[0]})")
        return 0
    what = f"{_size(report.bytes_before)} -> {_size(report.bytes_after)}"
    print(f"{where}: gave back {_size(report.given_back)} ({what})")
    if report.kind == "sqlite":
        steps = f"{report.pages_freed:,} pages in {report.chunks:,} steps"
        if report.converted:
            steps = f"converted to incremental auto_vacuum by a full VACUUM, then {steps}"
        print(f"  {steps}; the longest held writers off {report.longest_step * 1000:.0f} ms")
    else:
        print(f"  tables rewritten; the longest held its lock {report.longest_step:.1f} s")
    for note in report.notes:
        warn(note)
    return 0 if report.complete else 1
