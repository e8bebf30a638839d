"""The options of ``sessionstore effects`` (run by `sessionstore.cli.effects`),
apart from it so that building the parser loads nothing else."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["EFFECTS_EXAMPLES", "EFFECTS_SUMMARY", "add_effects_arguments"]

EFFECTS_SUMMARY = (
    "list the side effects in doubt or dead-lettered of every journal (exit 1 if any), "
    "with their age, tool, session and attempts; forget old finished ones"
)

EFFECTS_EXAMPLES = (
    "sessionstore effects",
    "sessionstore effects --json | jq -r 'select(.state == \"dead letter\") | .key'",
    "sessionstore effects --forget-before 2026-11-01   # list what would go",
    "sessionstore effects --forget-before 2026-11-01 --reason 'older than 30 days' --yes",
)


def add_effects_arguments(parser: argparse.ArgumentParser, date: Callable[[str], Any]) -> None:
    """The options of ``sessionstore effects``; ``date`` reads a DATE (the
    parser's, as this module imports no other of the command line)."""
    parser.add_argument(
        "--json", action="store_true", help="one JSON object a line: journal, key, state, ..."
    )
    parser.add_argument(
        "--forget-before",
        type=date,
        metavar="DATE",
        help="forget the effects that finished (done, failed, not done) before DATE "
        "(RFC 3339; a date alone is its midnight UTC, a time needs its offset): listed, "
        "and with --yes forgotten, "
        "each recorded. A forgotten effect's key runs afresh on its next run: forget a "
        "done one only when no run will replay it, or it runs twice",
    )
    parser.add_argument("--reason", metavar="TEXT", help="--forget-before: why (recorded)")
    parser.add_argument(
        "--by", metavar="NAME", help="--forget-before: who prunes (default: your login name)"
    )
    parser.add_argument(
        "--yes", action="store_true", help="--forget-before: forget them (without: list only)"
    )
