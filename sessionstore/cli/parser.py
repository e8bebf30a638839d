"""The command line's parser: every command, its options, its help with an example.

It names each command's module without importing it: a run loads the
module of its command alone, and ``--help`` or ``--version`` none.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sessionstore import __version__
from sessionstore.cli.defaults import (
    DB_ENV,
    DEFAULT_DB,
    HITS,
    HTML,
    KEY_FILE_ENV,
    KEYRING_ENV,
    KEYS_ENV,
    PAGE,
    default_target,
)
from sessionstore.cli.effects_options import (
    EFFECTS_EXAMPLES,
    EFFECTS_SUMMARY,
    add_effects_arguments,
)
from sessionstore.cli.policy_options import add_expire_options, add_policy_options

if TYPE_CHECKING:
    from sessionstore.cli.output import Command
    from sessionstore.timestamps import Timestamp

__all__ = ["COUNT_RULE", "LazyCommand", "build_parser"]

_DB_HELP = (
    "the store: a .db path or sqlite:///file.db, postgresql://..., a directory "
    f"(JSONL) or jsonl:///dir (default: ${DB_ENV}, else {DEFAULT_DB})"
)
_KEY_FILE_HELP = (
    "a sealed store's master keys, one a line, the newest first (default: "
    f"${KEY_FILE_ENV}, else the keys in ${KEYS_ENV}); never a key on the command line"
)
_KEYRING_HELP = (
    f"a sealed store's keyring: a file or a database URL (default: ${KEYRING_ENV}, else, "
    "for SQLite, <database>.keys beside it)"
)

_NAMED = (
    "a conversation's name, an id, `latest` (the last written to) or the start of an id, "
    "4 characters or more (`sessionstore ls` and `sessionstore head` list them)"
)
_SESSION_HELP = f"the session: {_NAMED}"
_EXACT_HELP = (
    "take the session given as a whole id only (not a conversation's name, `latest` or "
    "an id's start): a conversation's first session, once the conversation moved on"
)

# More than any store holds: a larger count means the same (and the databases' integers hold it).
_COUNT_MAX = sys.maxsize // 2

COUNT_RULE = "a whole number of 1 or more"
"""What every count option takes: a count of 0 would show nothing, so it is refused as a mistake."""


def _count_argument(text: str) -> int:
    """A count option's value: `COUNT_RULE`, at most `_COUNT_MAX`. argparse names the option."""
    digits = text.strip()
    if digits.isascii() and digits.isdigit() and len(digits) > 18:
        return _COUNT_MAX  # more than any count (and more digits than int() may read)
    try:
        number = int(digits) if digits.isascii() else None
    except ValueError:
        number = None
    if number is None or number < 1:
        raise argparse.ArgumentTypeError(f"must be {COUNT_RULE}, not {text!r}")
    return min(number, _COUNT_MAX)


def _date_argument(text: str) -> Timestamp:
    """A DATE option (``--before``, ``--forget-before``): `given_instant`'s rule."""
    from sessionstore.errors import ConfigurationError
    from sessionstore.timestamps import given_instant  # loaded by a run given a date

    try:
        return given_instant(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _idle_argument(text: str) -> timedelta:
    """``--idle``: ``90d`` or ``12h``."""
    match = re.fullmatch(r"(\d+)([dh])", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a number of days or hours (90d, 12h): {text!r}")
    number = int(match[1])
    try:
        age = timedelta(days=number) if match[2] == "d" else timedelta(hours=number)
        datetime.now(UTC) - age  # a time a date can still name
    except OverflowError:
        raise argparse.ArgumentTypeError(f"reaches back before the year 1: {text!r}") from None
    return age


@dataclass(frozen=True)
class LazyCommand:
    """``run_<command>`` in ``sessionstore.cli.<module>``, imported when it runs."""

    module: str
    name: str

    def load(self) -> Command:
        command: Command = getattr(
            importlib.import_module(f"sessionstore.cli.{self.module}"), self.name
        )
        return command

    async def __call__(self, args: argparse.Namespace) -> int:
        return await self.load()(args)


_MODULES = {
    "ls": "browse",
    "search": "search",
    "title": "show",
    "show": "show",
    "html": "show",
    "import": "archives",
    "export": "archives",
    "retire": "retention",
    "expire": "retention",
    "keys": "keys",
    "vacuum": "vacuum",
    "effects": "effects",
}
"""The module of each command not in ``sessionstore.cli.commands``."""

_GLOBAL = (
    ("--db", "TARGET", _DB_HELP),
    ("--key-file", "FILE", _KEY_FILE_HELP),
    ("--keyring", "TARGET", _KEYRING_HELP),
)


def _session(
    parser: argparse.ArgumentParser, flag: str = "id", help: str = _SESSION_HELP, **how: Any
) -> None:
    """The session a command takes (`sessionstore.cli.naming`), and ``--exact``."""
    parser.add_argument(flag, metavar="SESSION", help=help, **how)
    parser.add_argument("--exact", action="store_true", help=_EXACT_HELP)


def _paged(parser: argparse.ArgumentParser, limit: str, fields: str, default: int | None) -> None:
    """``--limit``, ``--after`` and ``--json``, of a listing read a page at a time."""
    parser.add_argument(
        "--limit", type=_count_argument, default=default, metavar="N", help=f"at most N {limit}"
    )
    parser.add_argument(
        "--after", metavar="CURSOR", help="the next page: the cursor the last page ended with"
    )
    parser.add_argument("--json", action="store_true", help=f"one JSON object a line: {fields}")


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = argparse.ArgumentParser(
        prog="sessionstore",
        description="Keep the conversation histories of LLM agents safe.",
        epilog="example:\n  sessionstore demo && sessionstore ls",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sessionstore {__version__}")
    # The store's options may also follow the command; SUPPRESS keeps the value given before it.
    common = argparse.ArgumentParser(add_help=False)
    for flag, metavar, help in _GLOBAL:
        default = default_target() if flag == "--db" else None
        parser.add_argument(flag, metavar=metavar, default=default, help=help)
        common.add_argument(flag, metavar=metavar, default=argparse.SUPPRESS, help=help)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, *examples: str) -> argparse.ArgumentParser:
        """Add the command ``name``, run by ``run_<name>`` in its module."""
        added: argparse.ArgumentParser = commands.add_parser(
            name,
            parents=[common],
            help=summary,
            description=summary,
            epilog="example:\n" + "\n".join(f"  {example}" for example in examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        added.set_defaults(run=LazyCommand(_MODULES.get(name, "commands"), f"run_{name}"))
        return added

    migrate_ = command(
        "migrate",
        "upgrade a SQL database's schema to the newest revision",
        "sessionstore migrate --db sqlite:///sessions.db",
        "sessionstore migrate --status --db postgresql://agent@db.internal/sessions",
    )
    migrate_.add_argument(
        "--status", action="store_true", help="show the revision only (changes nothing)"
    )
    ls = command(
        "ls",
        f"list sessions, newest activity first ({PAGE} on a terminal, all when piped); "
        "marks corrupt ones",
        "sessionstore ls --db sessions.db",
        "sessionstore ls --owner alice --order created --limit 20",
        "sessionstore ls --json | jq -r 'select(.entries > 100) | .id'",
        "sessionstore ls --tree",
    )
    ls.add_argument(
        "--order",
        choices=["last_activity", "created"],
        default="last_activity",
        help="newest first by the store's last write to the session (default), or by creation",
    )
    ls.add_argument("--owner", metavar="OWNER", help="only the sessions whose header names OWNER")
    _paged(
        ls,
        f"sessions (default: {PAGE} on a terminal, all when piped)",
        "id, title, owner, parent, created, last_activity, entries, compacted, fault, cursor",
        None,
    )
    ls.add_argument(
        "--tree", action="store_true", help="draw the forks under their parents, with the heads"
    )
    search = command(
        "search",
        "find the messages that say every word, best first; exit 1 when none does",
        "sessionstore search flaky test",
        "sessionstore search 'rate limit' --owner alice --json",
    )
    search.add_argument(
        "words", nargs="+", metavar="WORD", help="words to find (whole words, any case)"
    )
    search.add_argument("--owner", metavar="OWNER", help="only in the sessions of OWNER")
    _paged(
        search,
        f"hits (default: {HITS})",
        "session_id, entry_id, seq, role, snippet, highlights, cursor",
        HITS,
    )
    titled = command(
        "title",
        "give a session a title (or --clear it); with no TEXT, show every title it had",
        "sessionstore title 3f2b9c1e-0000-4000-8000-000000000000 'Flaky CI test'",
        "sessionstore title 3f2b9c1e-0000-4000-8000-000000000000",
    )
    _session(titled)
    titled.add_argument("text", nargs="?", metavar="TEXT", help="the new title (quote it)")
    titled.add_argument(
        "--clear", action="store_true", help="take the titles given back: the header's again"
    )
    fork = command(
        "fork",
        "branch a session: a new one holding its history up to an entry; prints the new id",
        "sessionstore fork 3f2b9c1e-0000-4000-8000-000000000000 --at 9d1c-entry --head chat-42",
    )
    _session(fork, "source", f"the session to branch from: {_NAMED}")
    fork.add_argument(
        "--at", metavar="ENTRY", help="the id of the last entry to keep (default: all)"
    )
    fork.add_argument("--id", metavar="ID", help="the new session's id (default: a new UUID)")
    fork.add_argument("--head", metavar="NAME", help="then point the head NAME at the new session")
    head = command(
        "head",
        "show where a named head stands and every place it stood (or list the heads)",
        "sessionstore head chat-42",
        "sessionstore head chat-42 --set 3f2b9c1e-0000-4000-8000-000000000000",
    )
    head.add_argument("name", nargs="?", help="the head (default: list every head)")
    _session(head, "--set", f"first move the head to SESSION: {_NAMED}")
    show = command(
        "show",
        "show a session's entries, as they are read (Ctrl-C stops)",
        "sessionstore show chat-42 --tail 20   # the conversation chat-42, as its agent sees it",
        "sessionstore show latest",
        "sessionstore show 3f2b9c1e-0000-4000-8000-000000000000 --json > session.jsonl",
        "sessionstore show 3f2b9c1e-0000-4000-8000-000000000000 --context --check openai",
    )
    _session(show)
    view = show.add_mutually_exclusive_group()
    view.add_argument("--context", action="store_true", help="the context built for the model")
    show.add_argument(
        "--check",
        choices=["openai", "anthropic", "openai-agents"],
        help="with --context: name each tool call or result that lost its pair (exit 1)",
    )
    view.add_argument(
        "--json", action="store_true", help="the stored lines, verbatim, header first (pipeable)"
    )
    some = show.add_mutually_exclusive_group()
    some.add_argument(
        "--limit", type=_count_argument, metavar="N", help="only the first N entries (or messages)"
    )
    some.add_argument(
        "--tail", type=_count_argument, metavar="N", help="only the last N entries (or messages)"
    )
    imported = command(
        "import",
        "import a JSONL archive (sessions/, journals/, heads/); importing twice adds nothing",
        "sessionstore import ./archive --db sessions.db",
        "sessionstore import ./backup --db restored.db --key-file store.key   # an encrypted one",
    )
    imported.add_argument("path", help="the archive directory")
    exported = command(
        "export",
        "export sessions, journals and heads as a JSONL archive (incremental)",
        "sessionstore export ./archive --session 3f2b9c1e-0000-4000-8000-000000000000",
        "sessionstore export ./archive --html   # and archive/html/<id>.html to read",
        "sessionstore export ./backup --encrypted --db sessions.db --key-file store.key",
    )
    exported.add_argument("dir", help="the archive directory: new, empty, or an archive to extend")
    _session(
        exported, "--session", f"export only this session (repeatable): {_NAMED}", action="append"
    )
    exported.add_argument(
        "--html",
        action="store_true",
        help=f"also write DIR/{HTML}/<id>.html, a readable page per session (import ignores it)",
    )
    exported.add_argument(
        "--encrypted",
        action="store_true",
        help="keep what an encrypted store seals sealed: DIR/sessions/<id>.sealed and "
        "DIR/keys.jsonl, the data keys wrapped (import opens them with the key file)",
    )
    exported.add_argument(
        "--plaintext",
        action="store_true",
        help="write an encrypted store's sessions (or --html pages) readable: without it, "
        "exporting a sealed store needs --encrypted",
    )
    page = command(
        "html",
        "write a session as one self-contained HTML page (no script, no fetch)",
        "sessionstore html 3f2b9c1e-0000-4000-8000-000000000000 --out session.html",
    )
    _session(page)
    page.add_argument("--out", metavar="FILE", help="write the page to FILE (default: stdout)")
    retired = command(
        "retire",
        "move old sessions into an archive, checked byte for byte, then erase them from the store",
        "sessionstore retire --to ./archive --idle 90d",
        "sessionstore retire --to ./archive --before 2026-01-01 --db sessions.db",
    )
    retired.add_argument(
        "--to", required=True, metavar="DIR", help="the archive: new, empty, or one to extend"
    )
    retired.add_argument(
        "--before",
        "--created-before",
        type=_date_argument,
        metavar="DATE",
        help="only sessions created before DATE (RFC 3339, or YYYY-MM-DD: midnight UTC)",
    )
    retired.add_argument(
        "--idle",
        type=_idle_argument,
        metavar="AGE",
        help="only sessions with no entry for AGE: Nd days or Nh hours (90d)",
    )
    _session(retired, "--session", f"only this session (repeatable): {_NAMED}", action="append")
    retired.add_argument(
        "--yes",
        action="store_true",
        help="do not ask before retiring every session of the store (needed when stdin "
        "is not a terminal)",
    )
    add_policy_options(retired, count=_count_argument, action="retire")
    expire = command(
        "expire",
        "erase the sessions a retention policy chooses (idle, created before, owner, tag, "
        "keeping the newest N per owner), each leaving an erasure record",
        "sessionstore expire --idle 90d --keep-newest 20 --dry-run",
        "sessionstore expire --owner bot-7 --tag scratch --created-before 2026-01-01 --yes",
    )
    add_expire_options(expire, count=_count_argument, date=_date_argument, idle=_idle_argument)
    verify = command(
        "verify",
        "check every line decodes, seq has no gap, compaction targets exist, integrity",
        "sessionstore verify --db sessions.db",
        "sessionstore verify --db sessions.db --anchors /backups/sessions.anchors",
    )
    verify.add_argument(
        "--anchors",
        metavar="FILE",
        help="check the sessions against the anchors in FILE (none yet: a new file), "
        "then, when nothing is wrong, write their new anchors there (docs/sql.md, Anchors)",
    )
    erase = command(
        "erase",
        "remove a whole session for good, leaving a record (when, why, a digest; no content)",
        "sessionstore erase 3f2b9c1e-0000-4000-8000-000000000000 --reason 'user request #812'",
        "sessionstore erase chat-7 --reason 'retention: 90 days' --yes",
    )
    _session(erase)
    erase.add_argument("--reason", required=True, metavar="TEXT", help="why: kept in the record")
    erase.add_argument(
        "--yes", action="store_true", help="do not ask (needed when stdin is not a terminal)"
    )
    command(
        "erasures",
        "list the records of erased sessions and journals: kind, name, at, reason, lines, digest",
        "sessionstore erasures --db ./sessions",
    )
    journal = command(
        "journal",
        "show an agent's crash-recovery journal and its side effects (no NAME: list them); "
        "settle an effect in doubt",
        "sessionstore journal",
        "sessionstore journal demo-agent",
        "sessionstore journal --in-doubt   # every journal's effects in doubt; exit 1 if any",
        'sessionstore journal mailer --settle chat-1:call_7 done --result \'{"id": "m-7"}\' '
        "--reason 'in the sent folder'",
        "sessionstore journal mailer --settle chat-1:call_7 not-done --reason 'not sent: run it'",
    )
    journal.add_argument(
        "name",
        nargs="?",
        help="the journal name (none: list every journal; with --in-doubt, all of them)",
    )
    journal.add_argument(
        "--in-doubt",
        action="store_true",
        help="only the effects started and never finished (a crash between); exit 1 if any",
    )
    journal.add_argument(
        "--settle",
        nargs=2,
        metavar=("KEY", "OUTCOME"),
        help="settle the effect KEY, in doubt, as you found it: done (its next run returns "
        "--result), not-done (its next run runs it) or failed (its next run fails with "
        "--reason); recorded with the time, --reason and --by",
    )
    journal.add_argument(
        "--result",
        metavar="JSON",
        help="--settle KEY done: what the effect returned, as JSON (a string in quotes)",
    )
    journal.add_argument(
        "--reason", metavar="TEXT", help="--settle: what you found, and where (recorded)"
    )
    journal.add_argument(
        "--by", metavar="NAME", help="--settle: who settles it (default: your login name)"
    )
    keys = command(
        "keys",
        "encryption at rest: make a master key, see what a sealed store's keyring "
        "holds, rewrap its data keys under a new master key",
        "sessionstore keys generate --out new.key",
        "sessionstore keys status --db sessions.db --key-file store.key",
        "cat new.key old.key > both.key && sessionstore keys rotate --key-file both.key",
    )
    keys.add_argument(
        "action",
        choices=["generate", "status", "rotate", "seal-heads"],
        help="generate: print (or --out) a new key; status: the store's keyring; rotate: "
        "rewrap every data key under the key file's first key; seal-heads: authenticate, "
        "once, the heads of a store sealed before migration 0010",
    )
    keys.add_argument(
        "--out", metavar="FILE", help="generate: write the key to FILE (created private, 0600)"
    )
    vacuumed = command(
        "vacuum",
        "give the disk back after erasures, with the store in use (SQLite in short steps; "
        "PostgreSQL: VACUUM FULL, docs/sql.md); prints the size before and after",
        "sessionstore vacuum --db sessions.db",
        "sessionstore vacuum --db postgresql://admin@db.internal/sessions",
    )
    vacuumed.add_argument(
        "--no-convert",
        action="store_true",
        help="SQLite: leave a file made before incremental auto_vacuum as it is (converting "
        "it is a full VACUUM, which holds writers off for its whole run)",
    )
    vacuumed.add_argument(
        "--full",
        action="store_true",
        help="SQLite: one full VACUUM instead of short steps: far quicker when most of the "
        "file was erased, but writers wait for its whole run",
    )
    add_effects_arguments(command("effects", EFFECTS_SUMMARY, *EFFECTS_EXAMPLES), _date_argument)
    command(
        "demo",
        "play a realistic agent conversation into the store and show what it keeps",
        "sessionstore demo --db demo.db",
    )
    return parser
