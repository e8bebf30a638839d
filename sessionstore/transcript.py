"""HTML transcripts: a session as one self-contained page, written as it is read.

`render_html` yields the page an entry at a time (`SessionStore.iter_entries`),
in memory bounded by one entry plus the ids of the current context;
`write_html` writes it to a text file; `export_html` writes ``<id>.html`` for
many sessions, a fork's page linking its parent's. Each message is shown as
`sessionstore.parts.read_message` reads it, tool calls and results folded.

The page fetches nothing and runs no script (a Content-Security-Policy
forbids both, should a stored text get past the escaping). Everything stored
is escaped text, never markup; control characters, bidirectional overrides
and lone surrogates show as visible escapes, so a text can neither hide
itself nor reorder what is around it. Every entry's block has
``content-visibility: auto``, so a page of 100,000 entries lays out only what
is on screen and stays one file.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from sessionstore.backends.records import current_title
from sessionstore.errors import (
    InvalidRecordError,
    SessionNotFoundError,
    SessionStoreError,
    StorageError,
)
from sessionstore.models import CompactionEntry, Message, MessageEntry, SessionMeta
from sessionstore.parts import Piece, Reading, Said, ToolCall, ToolResult, read_message
from sessionstore.store import SessionStore
from sessionstore.wire import encode_value

__all__ = ["TextSink", "export_html", "page_name", "render_html", "write_html"]

_ROLES = frozenset({"user", "assistant", "system", "tool"})
# C0 and C1 controls but newline and tab, bidirectional marks, embeddings,
# overrides and isolates, and lone surrogates: shown as escapes, never as is.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

# Should a stored text ever get past the escaping: no script, no fetch.
_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_CSS = """
:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--dim:#6e6e73;--line:#d2d2d7;
--user:#e8f0fe;--assistant:#f3f3f5;--system:#fff4e0;--tool:#eaf7ee;--other:#f5f0ff;
--ctx:#2f6fde;--compaction:#fdf1c7}
@media (prefers-color-scheme:dark){:root{--fg:#e8e8ed;--bg:#161618;--dim:#9a9aa0;
--line:#3a3a3e;--user:#1d2a44;--assistant:#242428;--system:#3a2f1a;--tool:#1c3324;
--other:#2c2440;--compaction:#3d3514}}
body{margin:0 auto;max-width:60rem;padding:1rem;font:15px/1.5 system-ui,sans-serif;
color:var(--fg);background:var(--bg)}
header{border-bottom:1px solid var(--line);margin-bottom:1rem}
h1{font-size:1.2rem;margin:.2rem 0;overflow-wrap:anywhere}
.meta,.entry-meta{color:var(--dim);font-size:.8rem;overflow-wrap:anywhere}
.legend{font-size:.85rem}
.legend .mark{display:inline-block;width:.3rem;height:1em;background:var(--ctx);
vertical-align:middle;margin-right:.3rem}
.entry{content-visibility:auto;contain-intrinsic-size:auto 6rem;margin:.6rem 0;
padding:.5rem .8rem;border-radius:.4rem;border-left:.3rem solid transparent}
.entry.in-context{border-left-color:var(--ctx)}
.role-user{background:var(--user)}
.role-assistant{background:var(--assistant)}
.role-system{background:var(--system)}
.role-tool{background:var(--tool)}
.role-other{background:var(--other)}
.compaction{background:var(--compaction)}
.role{font-weight:600;font-size:.85rem;text-transform:uppercase;letter-spacing:.04em}
.text,pre{white-space:pre-wrap;overflow-wrap:anywhere;unicode-bidi:isolate;margin:.3rem 0}
pre{font:13px/1.4 ui-monospace,monospace}
details{margin:.3rem 0;border:1px solid var(--line);border-radius:.3rem;padding:.2rem .5rem}
summary{cursor:pointer;font-size:.9rem}
.hidden-char{color:#c0392b;font:12px ui-monospace,monospace}
.ctx-note{color:var(--ctx);font-size:.75rem}
"""


class TextSink(Protocol):
    """Where `write_html` writes: any text file (``sys.stdout``, an open file)."""

    def write(self, text: str, /) -> object: ...


def page_name(session_id: str) -> str:
    """The file name of a session's page, ``<id>.html``, as `export_html` writes it."""
    return f"{session_id}.html"


def _text(value: str) -> str:
    """Stored text as HTML text: escaped, its hidden characters made visible."""
    return _HIDDEN.sub(_visible, html.escape(value, quote=True))


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    shown = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return f'<span class="hidden-char">{shown}</span>'


def _attribute(value: str) -> str:
    """Stored text as an attribute value: escaped, hidden characters as escapes."""
    return _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", html.escape(value, quote=True))


def _anchor(entry_id: str) -> str:
    """The fragment naming an entry's block (its ``id`` attribute, and the link's)."""
    return "entry-" + quote(entry_id, safe="")


def _json(value: Any) -> str:
    try:
        shown = encode_value(value)
    except InvalidRecordError:
        shown = repr(value)  # not JSON (a memory store's odd value): shown anyway
    return f'<pre class="json">{_text(shown)}</pre>'


def _role_class(role: str, label: str) -> str:
    """An entry's colour: its role's, a tool's for an openai-agents tool item."""
    if role in _ROLES:
        return f"role-{role}"
    return "role-tool" if label in ("tool call", "tool result") else "role-other"


class _Renderer:
    """The page's pieces, with the tool calls seen so far (to pair results)."""

    def __init__(self, in_context: set[str]) -> None:
        self.in_context = in_context
        self.calls: dict[str, tuple[str, str]] = {}  # call id -> (anchor, name)
        self.count = 0
        self.made_calls = 0

    # ------------------------------------------------------------ page

    def head(self, meta: SessionMeta, messages_in_context: int, named: str | None) -> str:
        title = _text(meta.id)
        # A session's title, when it has one, heads the page and names its
        # tab; the id stays on the page, below it.
        tab = f"session {title}"
        heading = f'<h1>session <span class="session-id">{title}</span></h1>'
        if named is not None:
            tab = f"{_text(named)} &middot; {tab}"
            heading = (
                f'<h1 class="title">{_text(named)}</h1>\n'
                f'<div class="meta">session <span class="session-id">{title}</span></div>'
            )
        parent = ""
        if meta.parent_session is not None:
            href = _attribute(quote(page_name(meta.parent_session)))
            parent = (
                f'<div class="meta parent">forked from <a rel="up" href="{href}">'
                f"{_text(meta.parent_session)}</a></div>"
            )
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">\n'
            '<meta name="viewport" content="width=device-width,initial-scale=1">\n'
            '<meta name="referrer" content="no-referrer">\n'
            f"<title>{tab}</title>\n<style>{_CSS}</style></head>\n<body>\n"
            f"<header>{heading}\n"
            f'<div class="meta">created <time class="created">{_text(meta.created_at)}</time>'
            f" &middot; format version {meta.version}</div>\n{parent}\n"
            '<p class="legend"><span class="mark"></span>marked entries are '
            f"<strong>in the model's context</strong> ({messages_in_context} "
            "messages; a compaction's summary stands for what it cut)</p></header>\n<main>\n"
        )

    def foot(self) -> str:
        return f'</main>\n<footer class="meta">{self.count} entries</footer>\n</body></html>\n'

    # ------------------------------------------------------------ entries

    def entry(self, entry: MessageEntry | CompactionEntry) -> str:
        self.count += 1
        marked = entry.id in self.in_context
        if isinstance(entry, MessageEntry):
            reading = read_message(entry.message)
            classes = ["entry", "message", _role_class(entry.message.role, reading.label)]
            body = self._message(entry.message, reading)
            who = f'<div class="role">{_text(reading.label)}</div>'
        else:
            classes = ["entry", "compaction"]
            body = self._compaction(entry)
            who = '<div class="role">compaction</div>'
        if marked:
            classes.append("in-context")
        note = '<span class="ctx-note">in the model\'s context</span> ' if marked else ""
        meta = (
            f'<div class="entry-meta">{note}#{self.count} &middot; '
            f'<span class="entry-id">{_text(entry.id)}</span> &middot; '
            f'<time class="timestamp">{_text(entry.timestamp)}</time></div>'
        )
        return (
            f'<article class="{" ".join(classes)}" id="{_attribute(_anchor(entry.id))}">'
            f"{who}{meta}{body}</article>\n"
        )

    def _compaction(self, entry: CompactionEntry) -> str:
        before = "" if entry.tokens_before is None else f", {entry.tokens_before} tokens before"
        href = _attribute("#" + _anchor(entry.first_kept_id))
        return (
            f'<div class="text summary">{_text(entry.summary)}</div>'
            '<div class="meta">the history before '
            f'<a href="{href}">{_text(entry.first_kept_id)}</a> '
            f"is summarized for the model{before}; it stays stored</div>"
        )

    def _message(self, message: Message, reading: Reading) -> str:
        parts = [self._pieces(reading.pieces)]
        if message.streaming:
            parts.append('<div class="meta">streaming: true</div>')
        if reading.fields:
            parts.append(
                f'<details class="fields"><summary>other fields ({len(reading.fields)})</summary>'
                f"{_json(reading.fields)}</details>"
            )
        return "".join(parts)

    def _pieces(self, pieces: Sequence[Piece]) -> str:
        return "".join(self._piece(piece) for piece in pieces)

    def _piece(self, piece: Piece) -> str:
        if isinstance(piece, Said):
            shown = f'<div class="text">{_text(piece.text)}</div>'
            if piece.fields:
                shown += (
                    '<details class="fields"><summary>part fields</summary>'
                    f"{_json(piece.fields)}</details>"
                )
            return shown
        if isinstance(piece, ToolCall):
            return self._call(piece)
        if isinstance(piece, ToolResult):
            return self._result(piece)
        return _json(piece.value)

    # ------------------------------------------------------------ tools

    def _call(self, call: ToolCall) -> str:
        self.made_calls += 1
        anchor = f"call-{self.made_calls}"
        shown_name = call.name if call.name is not None else "(unnamed)"
        named = ""
        if call.call_id is not None:
            self.calls[call.call_id] = (anchor, shown_name)
            named = f' data-call-id="{_attribute(call.call_id)}"'
        if isinstance(call.arguments, str):
            body = f'<pre class="arguments">{_text(call.arguments)}</pre>'
        else:
            body = "" if call.arguments is None else _json(call.arguments)
        return (
            f'<details class="tool-call" id="{anchor}"{named}>'
            f'<summary>tool call <code class="tool-name">{_text(shown_name)}</code> '
            f'<span class="meta">{_text(call.call_id or "")}</span></summary>{body}</details>'
        )

    def _result(self, result: ToolResult) -> str:
        call_id = result.call_id or ""
        found = self.calls.pop(call_id, None) if result.call_id is not None else None
        name = result.name if result.name is not None else None if found is None else found[1]
        shown_name = f'<code class="tool-name">{_text(name)}</code>' if name is not None else ""
        if found is None:
            what = f"result of {shown_name}" if name is not None else "result of an unknown call"
            summary = f'{what} <span class="meta">{_text(call_id)}</span>'
            classes = "tool-result unpaired"
        else:
            summary = (
                f'result of <a class="pair" href="#{found[0]}">{shown_name}</a> '
                f'<span class="meta">{_text(call_id)}</span>'
            )
            classes = "tool-result paired"
        body = self._pieces(result.output)
        if result.status is not None:
            body = f'<div class="meta error">{_text(result.status)}</div>' + body
        return (
            f'<details class="{classes}" data-call-id="{_attribute(call_id)}">'
            f"<summary>{summary}</summary>{body}</details>"
        )


async def _meta_of(store: SessionStore, session_id: str) -> SessionMeta:
    for meta in await store.list():
        if meta.id == session_id:
            return meta
    raise SessionNotFoundError(session_id)


async def render_html(
    store: SessionStore, session_id: str, *, meta: SessionMeta | None = None
) -> AsyncIterator[str]:
    """A session as a self-contained HTML page, in chunks, as it is read,
    headed by the session's title when it has one, then its id.

    Args:
        store: any store.
        session_id: the session.
        meta: its header, when the caller has it (spares a `list`).

    Yields:
        The head, a chunk per entry, the end; nothing for a session that
        cannot be read.

    Raises:
        SessionNotFoundError, CorruptSessionError: as `load` does; a line
            that does not decode raises when the page reaches it.
    """
    context = await store.load_context_with_ids(session_id)
    in_context = {entry_id for entry_id, _ in context}
    shown = len(context)
    del context  # keep the ids only: the messages are read again as entries
    if meta is None:
        meta = await _meta_of(store, session_id)
    named = current_title(meta, await store.titles(session_id))
    renderer = _Renderer(in_context)
    stream = store.iter_entries(session_id)
    try:
        first = await anext(stream, None)  # a session that went meanwhile raises here
        yield renderer.head(meta, shown, named)
        if first is not None:
            yield renderer.entry(first)
        async for entry in stream:
            yield renderer.entry(entry)
    finally:
        await stream.aclose()
    yield renderer.foot()


async def write_html(
    store: SessionStore, session_id: str, out: TextSink, *, meta: SessionMeta | None = None
) -> int:
    """Write a session's page (`render_html`) to a text file, chunk by chunk.

    Returns:
        The number of characters written.

    Raises:
        As `render_html`.
    """
    written = 0
    async for chunk in render_html(store, session_id, meta=meta):
        out.write(chunk)
        written += len(chunk)
    return written


async def export_html(
    store: SessionStore,
    directory: str | os.PathLike[str],
    *,
    sessions: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """Write ``<id>.html`` (`page_name`) into ``directory`` for sessions of a
    store, each page whole or left as it was (written aside, renamed).

    Args:
        store: any store.
        directory: where the pages go; created (private to its owner) when missing.
        sessions: the session ids; None for every session.

    Returns:
        The sessions whose page could not be written, each with why.

    Raises:
        StorageError: the directory is not one, or could not be written.
    """
    root = Path(directory)
    metas = {meta.id: meta for meta in await store.list()}
    ids = sorted(metas) if sessions is None else list(sessions)
    _make_directory(root)
    failed: list[tuple[str, str]] = []
    for session_id in ids:
        meta = metas.get(session_id)
        if meta is None:
            failed.append((session_id, str(SessionNotFoundError(session_id))))
            continue
        try:
            await _write_page(store, root, meta)
        except SessionStoreError as exc:
            failed.append((session_id, str(exc)))
    return failed


def _make_directory(root: Path) -> None:
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot make {root}: {exc}") from exc
    if root.is_symlink() or not root.is_dir():
        raise StorageError(f"cannot write pages into {root}: not a directory")


async def _write_page(store: SessionStore, root: Path, meta: SessionMeta) -> None:
    target = root / page_name(meta.id)
    try:
        fd, temporary = tempfile.mkstemp(dir=root, prefix=".", suffix=".html.tmp")
    except OSError as exc:
        raise StorageError(f"cannot write {target}: {exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="\n") as out:
            await write_html(store, meta.id, out, meta=meta)
        os.replace(temporary, target)
    except OSError as exc:
        _discard(temporary)
        raise StorageError(f"cannot write {target}: {exc}") from exc
    except BaseException:
        _discard(temporary)
        raise


def _discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
