"""Archives: ``import``, ``export`` (with ``--html``, a page per session), ``retire``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.text import Text

from sessionstore.archive import ArchiveReport, export_archive, import_archive, retire
from sessionstore.archive.report import HEADS, JOURNALS, SESSIONS, TITLES
from sessionstore.archive.sealing import KEYS
from sessionstore.backends.targets import is_sql_target
from sessionstore.cli.defaults import HTML, KEYRING_ENV
from sessionstore.cli.naming import sessions_named
from sessionstore.cli.opening import opened, path_exists, store_directory
from sessionstore.cli.output import Refused, counted, err_console, escaped, progress_bar, warn
from sessionstore.cli.wording import in_user_words, named
from sessionstore.errors import ArchiveError
from sessionstore.transcript import export_html

__all__ = ["run_export", "run_import", "run_retire"]


def _refusals(report: ArchiveReport, args: argparse.Namespace) -> None:
    """What a run warned of, skipped, refused or found faulty, in the user's words."""

    def said(text: object) -> str:
        return in_user_words(str(text), args)

    for warning in report.warnings:
        warn(said(warning))
    for issue in report.skipped:
        warn(f"skipped {said(issue)}")
    for issue in report.refused:
        err_console.print(Text(f"refused: {escaped(said(issue))}"))
    for fault in report.faults:
        err_console.print(Text(f"fault: {escaped(said(fault))}"))


def _archive_error(error: ArchiveError, args: argparse.Namespace) -> ArchiveReport:
    """The report of an export or import that refused files, its refusals printed."""
    report = error.report
    if not isinstance(report, ArchiveReport):
        raise error  # not a run's refusals: the archive itself (printed as an error)
    _refusals(report, args)
    return report


def _check_archive(path: str) -> None:
    if not path_exists(path):
        raise Refused(f"no such archive: {path} (it does not exist)")
    if not Path(path).is_dir():
        raise Refused(f"{path} is not an archive: not a directory")


async def run_import(args: argparse.Namespace) -> int:
    _check_archive(args.path)
    refused: ArchiveError | None = None
    new, done = _not_there_yet(args), False
    try:
        async with opened(args, read=False) as store:
            with progress_bar("importing") as progress:
                try:
                    report = await import_archive(store, args.path, progress=progress)
                except ArchiveError as exc:
                    report, refused = _archive_error(exc, args), exc
        done = refused is None or bool(report.sessions + report.journals + report.heads)
    finally:
        if not done:
            _remove(new)  # made for an import that failed and brought nothing: not left behind
    if refused is None:
        _refusals(report, args)
    print(
        f"imported {counted(report.sessions, 'session')} "
        f"({counted(report.entries, 'new entry', 'new entries')}), "
        f"{counted(report.journals, 'journal')} and {counted(report.heads, 'head')} "
        f"from {escaped(args.path)}"
    )
    if refused is not None:
        left = "" if done or not new else f"; {named(args.db)} was not created"
        raise Refused(f"import refused {counted(len(report.refused), 'file')} (listed above){left}")
    return 0


def _not_there_yet(args: argparse.Namespace) -> list[Path]:
    """The files (or directory) opening the store of ``args`` would make
    that are not there yet: a SQLite database, its WAL, its keyring; a
    JSONL directory. PostgreSQL's are not files: none."""
    directory = store_directory(args.db)
    if directory is not None:
        return [] if directory.exists() else [directory]
    if not is_sql_target(args.db):
        return []
    from sessionstore.backends.sql.engine import is_sqlite, parse_target

    url = parse_target(args.db)
    if not is_sqlite(url) or not url.database:
        return []
    base = url.database
    if Path(base).exists():
        return []  # a store already: its files (a WAL another process uses) are left alone
    made = [Path(base + end) for end in ("", "-wal", "-shm", "-journal", ".keys")]
    keyring = args.keyring or os.environ.get(KEYRING_ENV)
    if keyring and "://" not in keyring:
        made.append(Path(keyring))
    return [path for path in made if not path.exists()]


def _remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


_PARTS = (SESSIONS, JOURNALS, HEADS, TITLES, KEYS, HTML)
"""What an archive directory holds (``keys.jsonl``: the data keys of an
``export --encrypted``; ``html/``: the pages of ``export --html``)."""


def _check_export_directory(dest: Path, command: str) -> None:
    """Refuse to write an archive (``command``: ``export`` or ``retire``) into
    a file, or into a directory that holds other things than an archive
    (into which an archive would be mixed). An earlier archive is extended."""
    if not dest.exists():
        return
    if not dest.is_dir():
        raise Refused(f"cannot {command} to {dest}: not a directory")
    foreign = sorted(p.name for p in dest.iterdir() if p.name not in _PARTS)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        held = ", ".join(f"{part}/" for part in _PARTS[:-2]) + f", {KEYS}"
        raise Refused(
            f"cannot {command} to {dest}: not empty and not an archive (it holds {shown}); "
            f"an archive holds only {held} (and {HTML}/): "
            "choose a new or empty directory, or an earlier archive"
        )


async def run_export(args: argparse.Namespace) -> int:
    _check_export_directory(Path(args.dir), "export")
    refused: ArchiveError | None = None
    async with opened(args, read=True) as store:
        args.session = await sessions_named(store, args.session, exact=args.exact)
        _check_plaintext(args, sealed=bool(getattr(store, "encrypted", False)))
        with progress_bar("checking") as progress:
            progress(0, 1)
            faults = [s for s in await store.summaries(limit=None) if s.fault is not None]
            progress(1, 1)
        if args.session:
            faults = [s for s in faults if s.meta.id in args.session]
        with progress_bar("exporting") as progress:
            try:
                report = await export_archive(
                    store,
                    args.dir,
                    sessions=args.session or None,
                    progress=progress,
                    encrypted=args.encrypted,
                )
            except ArchiveError as exc:
                report, refused = _archive_error(exc, args), exc
        unpaged: list[tuple[str, str]] = []
        if args.html:
            with progress_bar("pages") as progress:
                progress(0, 1)
                unpaged = await export_html(store, Path(args.dir) / HTML, sessions=args.session)
                progress(1, 1)
    if refused is None:
        _refusals(report, args)
    for session_id, why in unpaged:
        err_console.print(
            Text(f"fault: no page for {escaped(session_id)}: {escaped(in_user_words(why, args))}")
        )
    for summary in faults:
        err_console.print(
            Text(
                f"fault: {escaped(in_user_words(summary.fault or '', args))} "
                "(exported as stored: `import` will refuse that file)"
            )
        )
    _exported(report, args.dir)
    if refused is not None:
        what = counted(len(report.refused), "file") + (
            f" and could not read {counted(len(report.faults), 'stored file')}"
            if report.faults
            else ""
        )
        raise Refused(f"export refused {what} (listed above)")
    if unpaged:
        raise Refused(f"{counted(len(unpaged), 'page')} could not be written (listed above)")
    if faults:
        raise Refused(
            f"{counted(len(faults), 'session')} exported with data that does not decode "
            "(listed above); `sessionstore verify` lists every fault"
        )
    return 0


def _check_plaintext(args: argparse.Namespace, *, sealed: bool) -> None:
    """Refuse to write a sealed store's sessions readable (a plain export,
    or ``--html`` pages) unless ``--plaintext`` says so; refuse
    ``--encrypted`` for a plain store, which has nothing sealed to keep."""
    if args.encrypted and not sealed:
        raise Refused(
            f"{named(args.db)} is not encrypted: --encrypted keeps an encrypted store's "
            "sessions sealed; export this one without it"
        )
    if not sealed or args.plaintext or (args.encrypted and not args.html):
        return
    what = "--html writes its pages" if args.html else "a plain export writes its sessions"
    keep = " (export --encrypted without --html)" if args.html else ": export --encrypted"
    raise Refused(
        f"{named(args.db)} is encrypted, and {what} to {args.dir} in plaintext; keep them "
        f"sealed{keep}, or pass --plaintext to write them readable"
    )


def _exported(report: ArchiveReport, where: str) -> None:
    """The summary line of an export: what it wrote, or that it wrote nothing."""
    if report.bytes == 0 and not report.refused and not report.faults:
        if not report.sessions + report.journals + report.heads:
            empty = "the store holds no session, journal or head"
            print(f"nothing to export to {escaped(where)}: {empty}")
            return
        held = [
            counted(report.sessions, "session"),
            counted(report.journals, "journal"),
            counted(report.heads, "head"),
        ]
        print(f"nothing new to export: {', '.join(held)} already in {escaped(where)}")
        return
    print(
        f"exported {counted(report.sessions, 'session')} "
        f"({counted(report.entries, 'new entry', 'new entries')}, "
        f"{counted(report.bytes, 'byte')} written), "
        f"{counted(report.journals, 'journal')} and {counted(report.heads, 'head')} "
        f"to {escaped(where)}"
    )


async def run_retire(args: argparse.Namespace) -> int:
    if args.before is None and args.idle is None and not args.session:
        raise Refused("retire needs --before, --idle or --session: it never retires everything")
    _check_export_directory(Path(args.to), "retire")
    declined: list[str] = []

    async def confirm(retiring: Sequence[str], held: int) -> bool:
        if args.yes or args.session or len(retiring) < held:
            return True  # named by id, or a choice that leaves some: as asked
        everything = f"every session of {named(args.db)} ({len(retiring)})"
        if not sys.stdin.isatty():
            raise Refused(
                f"retire would take {everything}: it asks on a terminal first; "
                "pass --yes to retire them all from a script"
            )
        err_console.print(Text(escaped(f"retire {everything} to {args.to}? [y/N] ")), end="")
        answer = await asyncio.to_thread(sys.stdin.readline)  # Ctrl-C stops it
        if answer.strip().lower() != "y":
            declined.extend(retiring)
            return False
        return True

    with contextlib.ExitStack() as shown:
        bar: Callable[[int, int], None] | None = None

        def progress(done: int, total: int) -> None:
            # The bar starts with the first session, after any question is
            # answered: one drawn meanwhile writes over the question.
            nonlocal bar
            if bar is None:
                bar = shown.enter_context(progress_bar("retiring"))
            bar(done, total)

        async with opened(args, read=True) as store:
            # A session not found is reported, and the others retired.
            chosen = await sessions_named(store, args.session, exact=args.exact, missing_ok=True)
            report = await retire(
                store,
                args.to,
                before=args.before,
                idle_for=args.idle,
                sessions=chosen,
                progress=progress,
                confirm=confirm,
            )
    if declined:
        raise Refused(f"not confirmed: {counted(len(declined), 'session')} left as they are")
    for session_id in report.retired:
        print(f"retired {escaped(session_id)}")
    for issue in report.skipped:
        label = "fault: skipped" if issue.fault else "skipped"
        err_console.print(Text(f"{label} {escaped(str(issue))}"))
    print(
        f"retired {counted(len(report.retired), 'session')} "
        f"({counted(report.bytes, 'byte')}) to {escaped(str(report.archive))}; "
        f"skipped {len(report.skipped)}"
    )
    faults = sum(issue.fault for issue in report.skipped)
    if faults:
        raise Refused(f"{counted(faults, 'session')} with a fault (listed above)")
    return 0
