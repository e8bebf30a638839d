"""The options of a retention policy (`sessionstore.retention.Policy`), one a field,
shared by ``expire`` and ``retire``. The parser passes its converters in: this
module imports no other of the command line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["POLICY_OPTIONS", "add_expire_options", "add_policy_options"]

POLICY_OPTIONS = ("owner", "tag", "keep_newest", "dry_run")
"""The options ``retire`` takes beyond its first ones: given any, it runs as a policy."""


def add_policy_options(
    parser: argparse.ArgumentParser, *, count: Callable[[str], Any], action: str
) -> None:
    """``--owner``, ``--tag``, ``--keep-newest`` and ``--dry-run`` on ``parser``."""
    parser.add_argument("--owner", metavar="OWNER", help="only the sessions of OWNER")
    parser.add_argument(
        "--tag",
        action="append",
        metavar="TAG",
        help="only the sessions tagged TAG (repeatable: every tag given)",
    )
    parser.add_argument(
        "--keep-newest",
        type=count,
        metavar="N",
        help="never the newest N sessions of each owner, by creation (those without an "
        "owner count as one owner)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"list what would {action}, with sizes and reasons, and a total; write nothing",
    )


def add_expire_options(
    parser: argparse.ArgumentParser,
    *,
    count: Callable[[str], Any],
    date: Callable[[str], Any],
    idle: Callable[[str], Any],
) -> None:
    """Every option of ``expire``."""
    parser.add_argument(
        "--idle",
        type=idle,
        metavar="AGE",
        help="only sessions with no entry for AGE: Nd days or Nh hours (90d)",
    )
    parser.add_argument(
        "--created-before",
        "--before",
        dest="before",
        type=date,
        metavar="DATE",
        help="only sessions created before DATE (RFC 3339, or YYYY-MM-DD: midnight UTC)",
    )
    add_policy_options(parser, count=count, action="expire")
    parser.add_argument(
        "--reason",
        metavar="TEXT",
        help="what each erasure records (default: 'expired by policy: ' and the filters)",
    )
    parser.add_argument(
        "--yes", action="store_true", help="do not ask (needed when stdin is not a terminal)"
    )
