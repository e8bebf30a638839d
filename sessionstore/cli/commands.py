"""The small commands: ``migrate``, ``fork``, ``head``, ``erase``, ``erasures``,
``verify``, ``journal``, ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text

from sessionstore.anchors import read_anchors, write_anchors
from sessionstore.cli.defaults import login
from sessionstore.cli.naming import session_named
from sessionstore.cli.opening import check_store, key_source, opened
from sessionstore.cli.output import (
    Refused,
    cell,
    console,
    counted,
    err_console,
    escaped,
    moment,
    preview,
    progress_bar,
    records,
    table,
)
from sessionstore.cli.wording import in_user_words, named, settle_hint
from sessionstore.effect_journals import effects_in_doubt
from sessionstore.effects import SETTLED, EffectState
from sessionstore.errors import InvalidRecordError, validate_session_id
from sessionstore.models import SessionMeta
from sessionstore.store import SessionStore
from sessionstore.verify import verify_store
from sessionstore.wire import decode_value, line_key

if TYPE_CHECKING:
    from sessionstore.journal import Journal

__all__ = [
    "run_demo",
    "run_erase",
    "run_erasures",
    "run_fork",
    "run_head",
    "run_journal",
    "run_migrate",
    "run_verify",
]


async def run_migrate(args: argparse.Namespace) -> int:
    from sessionstore import migrate  # alembic loads only for this command

    if args.status:
        await check_store(args.db, read=True, schema=False)
        current, head = await migrate.current(args.db), migrate.head()
        state = "up to date" if current == head else "needs `sessionstore migrate`"
        print(f"{escaped(named(args.db))}: revision {current or '(none)'}, newest {head}: {state}")
        return 0
    await check_store(args.db, read=False)
    await migrate.upgrade(args.db)
    print(f"{escaped(named(args.db))}: at revision {migrate.head()}")
    return 0


async def run_fork(args: argparse.Namespace) -> int:
    if args.head is not None:
        validate_session_id(args.head)  # before anything is made
    # A chosen id gets what a new session has: a creation time, now.
    meta = None if args.id is None else SessionMeta.new().model_copy(update={"id": args.id})
    async with opened(args, read=True) as store:
        source = await session_named(store, args.source, exact=args.exact)
        made = await store.fork(source, at=args.at, meta=meta)
        if args.head is not None:
            await store.set_head(args.head, made.id)
    print(escaped(made.id))
    return 0


async def run_head(args: argparse.Namespace) -> int:
    async with opened(args, read=True) as store:
        if args.name is None:
            names = sorted(await store.heads())
            rows = [(name, await store.head(name) or "-") for name in names]
            _pairs("heads", ("head", "session"), rows, " -> ")
            return 0
        if args.set is not None:
            await store.set_head(args.name, await session_named(store, args.set, exact=args.exact))
        history = await store.head_history(args.name)
    if not history:
        raise Refused(f"no head named {args.name!r} (`sessionstore head` lists them)")
    rows = [(move.at, move.session_id) for move in history]
    _pairs(f"head {args.name}", ("moved at", "session"), rows, "  ")
    return 0


def _pairs(title: str, columns: tuple[str, str], rows: Sequence[tuple[str, str]], sep: str) -> None:
    """Two columns never cut (a narrow table would fold them): a line a row; piped, `table`."""
    if not console.is_terminal:
        table(title, columns, rows)
        return
    console.print(Text(cell(title), style="bold"))
    for left, right in rows:
        console.print(Text(f" {cell(left)}{sep}").append(cell(right), style="bold"))


async def run_erase(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise Refused("--reason must say why (it is kept in the erasure record)")
    if not args.yes and not sys.stdin.isatty():
        raise Refused(
            "erase asks for confirmation on a terminal; pass --yes to erase from a script"
        )
    async with opened(args, read=True) as store:
        args.id = await session_named(store, args.id, exact=args.exact)
        digest = None
        if not args.yes:
            seen, lines = hashlib.blake2b(digest_size=32), 0
            async for block in store.raw_blocks(args.id):  # not found: refused before asking
                seen.update(block)
                lines += block.count(b"\n")
            entries = counted(max(lines - 1, 0), "entry", "entries")
            question = f"erase session {args.id!r} ({entries}) for good? [y/N] "
            err_console.print(Text(escaped(question)), end="")
            answer = await asyncio.to_thread(sys.stdin.readline)  # Ctrl-C stops it
            if answer.strip().lower() != "y":
                raise Refused(f"not confirmed: session {args.id!r} is left as it is")
            digest = seen.hexdigest()  # only what was shown: an append since refuses it
        record = await store.erase(args.id, reason=args.reason, digest=digest)
    entries = counted(record.lines, "entry", "entries")
    print(f"erased {escaped(record.name)}: {entries}, blake2b-256 {record.digest}")
    return 0


async def run_erasures(args: argparse.Namespace) -> int:
    async with opened(args, read=True) as store:
        records = await store.erasures()
    if not console.is_terminal:  # whole digests, for scripts to compare
        rows = [(r.kind, r.name, r.at, r.reason, r.lines, r.digest, r.key or "") for r in records]
        table("erasures", ("kind", "name", "at", "reason", "lines", "digest", "key"), rows)
        return 0
    # On a terminal, a few lines per record, readable at any width (the
    # digest cut to 16 digits; piped, it comes whole).
    console.print(Text("erasures", style="bold"))
    for r in records:
        lines = (
            counted(r.lines, "entry", "entries")
            if r.kind == "session"
            else counted(r.lines, "line")
        )
        head = Text(f" {r.kind} ").append(cell(r.name), style="bold")
        console.print(head.append(f"  erased {cell(r.at)}", style="dim"))
        console.print(Text(f"   {lines}, blake2b-256 {r.digest[:16]}…  reason: {cell(r.reason)}"))
        if r.key is not None:
            console.print(Text(f"   data key {cell(r.key)} destroyed: no copy opens it"))
    console.print(Text(counted(len(records), "erasure"), style="dim"))
    return 0


async def run_verify(args: argparse.Namespace) -> int:
    older = None if args.anchors is None else read_anchors(args.anchors)
    async with opened(args, read=True) as store:
        with progress_bar("verifying") as progress:
            report = await verify_store(store, progress=progress, anchors=older)
    for note in report.notes:
        err_console.print(Text(f"note: {escaped(in_user_words(note, args))}"))
    for fault in report.faults:
        err_console.print(Text(f"fault: {escaped(in_user_words(fault, args))}"))
    verdict = "ok" if report.ok else counted(len(report.faults), "fault")
    noted = f" ({counted(len(report.notes), 'note')})" if report.notes else ""
    anchored = f", {counted(len(older), 'anchor')}" if older else ""
    print(
        f"{verdict}: {counted(report.sessions, 'session')}, "
        f"{counted(report.entries, 'entry', 'entries')}{anchored} checked{noted}"
    )
    if args.anchors is not None:
        where = escaped(str(args.anchors))
        if report.ok:
            write_anchors(args.anchors, report.anchors)
            print(f"anchored {counted(len(report.anchors), 'session')} in {where}")
        else:
            err_console.print(Text(f"{where} left as it was: the faults above come first"))
    return 0 if report.ok else 1


async def run_journal(args: argparse.Namespace) -> int:
    if args.settle is not None:
        return await _settle(args)
    if args.in_doubt:
        return await _in_doubt(args)
    if args.name is None:
        return await _journals(args)
    async with opened(args, read=True) as store:
        await _check_journal(store, args.name)
        journal = await store.journal(args.name).read()
        lines = (await store.journal(args.name).read_bytes()).split(b"\n")
        effects = await store.journal(args.name).effects.read()
    rows = [
        (
            number,
            str(s.header.started_at) if s.header else "(no header)",
            s.header.model if s.header else "-",
            len(s.writes),
            "yes" if s.writes else "no",
        )
        for number, s in enumerate(journal.sessions, 1)
    ]
    columns = ("#", "started", "model", "writes", "interrupted")
    table(f"journal {args.name}", columns, rows, right=("#", "writes"))
    # A keyed line (a LangGraph checkpoint, a record found by its key) is no
    # session's write: counted apart, not called skipped.
    keyed = [n for n in journal.skipped if n <= len(lines) and line_key(lines[n - 1]) is not None]
    skipped = ", ".join(str(n) for n in journal.skipped if n not in set(keyed)) or "none"
    interrupted = sum(1 for _ in journal.interrupted())
    records = f", {counted(len(keyed), 'keyed line')} (records found by key)" if keyed else ""
    print(
        f"{counted(journal.writes(), 'write')}, "
        f"{counted(interrupted, 'interrupted session')}, skipped lines: {skipped}{records}"
    )
    if effects:
        _effects_table(f"effects of {args.name}", effects)
        tally = Counter(state.state for state in effects)
        not_done = f", {tally['not done']} not done" if tally["not done"] else ""
        print(
            f"effects: {tally['done']} done, {tally['failed']} failed, "
            f"{tally['in doubt']} in doubt{not_done}"
        )
    return 0


async def _journals(args: argparse.Namespace) -> int:
    """``journal`` with no name: every journal, its sessions, effects and effects in doubt."""
    rows = []
    async with opened(args, read=True) as store:
        for name in sorted(await store.journals()):
            journal = await store.journal(name).read()
            effects = await store.journal(name).effects.read()
            doubt = sum(1 for state in effects if state.state == "in doubt")
            rows.append((name, len(journal.sessions), len(effects), doubt))
    counts = ("sessions", "effects", "in doubt")
    table("journals", ("journal", *counts), rows, whole=("journal",), right=counts)
    if console.is_terminal:  # piped: the rows alone
        console.print(
            Text(
                f"{counted(len(rows), 'journal')}; `sessionstore journal NAME` shows one",
                style="dim",
            )
        )
    return 0


async def _check_journal(store: SessionStore, name: str) -> None:
    """Refuse a journal that holds nothing (mistyped, most likely), naming those there are."""
    store.journal(name)
    known = sorted(await store.journals())
    if name not in known:
        there = ", ".join(map(repr, known[:10])) + (", ..." if len(known) > 10 else "")
        raise Refused(f"journal not found: {name!r} (journals here: {there or 'none'})")


def _effects_table(title: str, effects: list[EffectState]) -> None:
    columns = ("key", "state", "tool", "session", "started", "finished", "error", "settled")
    rows = [
        (
            state.key,
            state.state,
            state.tool or "-",
            state.session or "-",
            moment(state.started or ""),
            moment(state.finished or ""),
            state.error or "-",
            _settled(state),
        )
        for state in effects
    ]
    records(title, columns, rows, head="key")


def _settled(state: EffectState) -> str:
    """Who settled an effect, and why ("-": it finished by itself)."""
    if state.reason is None:
        return "-"
    return state.reason if state.by is None else f"{state.by}: {state.reason}"


async def _in_doubt(args: argparse.Namespace) -> int:
    """Every effect in doubt or dead-lettered, of one journal or all (checked by
    hand after a crash); 1 if any. ``sessionstore effects`` says which is which."""
    async with opened(args, read=True) as store:
        if args.name is not None:
            await _check_journal(store, args.name)
            in_doubt = await store.journal(args.name).effects.in_doubt()
            found = [(args.name, state) for state in in_doubt]
            journals = 1
        else:
            found = [(item.journal, item.effect) for item in await effects_in_doubt(store)]
            journals = len(await store.journals())
    columns = ("journal", "key", "tool", "session", "started", "args")
    rows = [
        (
            name,
            s.key,
            s.tool or "-",
            s.session or "-",
            moment(s.started or ""),
            (s.args or "-")[:12],
        )
        for name, s in found
    ]
    records("effects in doubt", columns, rows, head="key")
    where = f"journal {args.name}" if args.name is not None else counted(journals, "journal")
    print(f"{counted(len(found), 'effect')} in doubt in {where}")
    if found:
        err_console.print(Text(settle_hint(args.db)))
    return 1 if found else 0


async def _settle(args: argparse.Namespace) -> int:
    """Settle an effect in doubt as the operator found it in the world."""
    key, outcome = args.settle
    if args.name is None:
        raise Refused("journal --settle needs the journal's NAME: journal NAME --settle KEY ...")
    if outcome not in SETTLED:
        raise Refused(f"--settle {key} {outcome}: the outcome is done, not-done or failed")
    if args.reason is None:
        raise Refused(f"--settle {key} {outcome} needs --reason TEXT: what you found, and where")
    if (args.result is None) == (outcome == "done"):
        raise Refused(
            f"--settle {key} done needs --result JSON: what the effect returned"
            if outcome == "done"
            else f"--settle {key} {outcome} takes no --result: only a done effect has one"
        )
    try:
        result = None if args.result is None else decode_value(args.result)
    except InvalidRecordError as exc:
        raise Refused(
            f"--result is not JSON ({exc}); a string goes in quotes: '\"sent\"'"
        ) from None
    async with opened(args, read=True) as store:
        await _check_journal(store, args.name)
        effects = store.journal(args.name).effects
        line = await effects.settle(
            key, outcome, result=result, reason=args.reason, by=args.by or login()
        )
        state = await effects.find(key)
    tool = "" if state is None or state.tool is None else f" ({state.tool})"
    by = "" if line.by is None else f" by {line.by}"
    said = outcome.replace("-", " ")
    print(escaped(f"settled effect {key!r}{tool} in journal {args.name}: {said}{by} at {line.at}"))
    print(escaped(f"  reason: {args.reason}"))
    print(escaped(_NEXT[outcome]))
    return 0


_NEXT = {
    "done": "its next run returns that result without running it",
    "not-done": "its next run runs it",
    "failed": "its next run fails with that reason without running it",
}


async def run_demo(args: argparse.Namespace) -> int:
    from sessionstore.cli.rows import ToolNames, message_line
    from sessionstore.demo import play_demo  # and the archive it round-trips: for this only

    async with opened(args, read=False) as store:
        result = await play_demo(store)
        sealed = bool(getattr(store, "encrypted", False))
    print(f"Played a {result.entries}-entry conversation into {escaped(named(args.db))}")
    print(
        _wrapped(
            f"session {result.session_id}, what the model is sent on its next call: "
            "the agent's system prompt (kept in code, not stored), a summary standing "
            "for the turns a compaction cut, then the turns after them:"
        )
    )
    names = ToolNames()
    for message in result.context:
        label, text = message_line(message, names)
        print(f"  {cell(label):>11}: {preview(text, 62)}")
    print(_journal_lines(result.journal, _store_options(args, sealed)))
    same = "byte-identical" if result.identical else "DIFFERENT"
    print(
        f"archive round trip (export, import, export): {counted(result.archive_files, 'file')}, "
        f"{counted(result.archive_bytes, 'byte')}, {same}"
    )
    print(escaped(f"next: sessionstore show {result.session_id} {_store_options(args, sealed)}"))
    return 0 if result.identical else 1


def _journal_lines(journal: Journal, options: str) -> str:
    """What the demo's journal holds, in words a newcomer reads."""
    from sessionstore.demo import AGENT

    runs = sum(1 for _ in journal.interrupted())
    kinds = Counter(write.line for session in journal.sessions for write in session.writes)
    what = " and ".join(counted(n, kind) for kind, n in sorted(kinds.items(), reverse=True))
    said = _wrapped(
        f"journal of agent {AGENT!r}, what survives a crash: "
        f"{counted(runs, 'run')} stopped before saving their state, and the "
        f"{counted(journal.writes(), 'write')} they made ({what}) are on record "
        "for the agent's next start to report; see them:"
    )
    return said + "\n  " + escaped(f"sessionstore journal {AGENT} {options}")


def _wrapped(text: str) -> str:
    """A sentence of the demo's, in lines of 80 columns at most, each made safe to print."""
    import textwrap

    lines = textwrap.wrap(text, 78, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(escaped(line) for line in lines)


def _store_options(args: argparse.Namespace, sealed: bool) -> str:
    """``--db`` as given, and a sealed store's key file and keyring: a command to copy."""
    words = ["--db", named(args.db)]
    given = key_source(args)
    if sealed and given is not None and given[1] is not None:
        words += ["--key-file", given[1]]
    if sealed and args.keyring:
        words += ["--keyring", named(args.keyring)]
    return " ".join(map(shlex.quote, words))
