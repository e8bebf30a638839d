"""The session a command names: a conversation's name, an id, ``latest``, an id's start.

The order, the refusals and what each step reads are in docs/cli.md, "Naming a session".
"""

from __future__ import annotations

import difflib
from collections.abc import AsyncGenerator, Sequence

from rich.text import Text

from sessionstore.cli.output import Refused, err_console, escaped
from sessionstore.errors import SessionNotFoundError, validate_session_id
from sessionstore.models import SessionMeta
from sessionstore.store import SessionStore

__all__ = ["LATEST", "PREFIX_MIN", "NotNamed", "session_named", "sessions_named"]

LATEST = "latest"
"""The name of the session the store last wrote to."""

PREFIX_MIN = 4
"""The fewest characters of an id that name a session by its start."""

_SHOWN = 10  # candidates an ambiguity lists
_NEAREST = 5  # names a "not found" suggests
_TITLED = 100  # the latest sessions whose titles (set since creation) a "not found" weighs


class NotNamed(Refused):
    """No session has the name a command was given."""


async def session_named(store: SessionStore, name: str, *, exact: bool = False) -> str:
    """The id of the session ``name`` names, in the order docs/cli.md gives; a
    note on stderr says which session a name other than its id resolved to.

    Args:
        store: the open store.
        name: what the command line was given.
        exact: take ``name`` as a whole session id only.

    Raises:
        InvalidSessionIdError: ``name`` breaks the session-id rule.
        NotNamed: no session has that name.
        Refused: more than one session has it, or it is a conversation
            whose session now was erased.
    """
    validate_session_id(name)
    if exact:
        if await _exists(store, name):
            return name
        raise NotNamed(f"session not found: {name!r} (--exact: a whole session id only)")
    head = await store.head(name)
    if head is not None:
        if head != name and not await _exists(store, head):
            raise Refused(  # not NotNamed: the name is not free to mean the session of its id
                f"the conversation {name!r} is at session {head}, which the store no longer "
                f"holds (erased); `sessionstore head {name}` lists where it has been"
            )
        if head != name and await _exists(store, name):
            await _check_shadowed(store, name, head)
            _note(
                f"{name!r} is the conversation {name!r}, now at session {head} "
                f"(its first session: --exact {name})"
            )
        elif head != name:
            _note(f"{name!r} is the conversation {name!r}, now at session {head}")
        return head
    if await _exists(store, name):
        return name
    if name == LATEST:
        page = await store.summaries(limit=1)
        if not page:
            raise NotNamed(f"{LATEST!r} names no session: the store holds none")
        _note(f"{LATEST!r} is session {page[0].id}, the last written to")
        return page[0].id
    metas = await store.list()
    ids = [meta.id for meta in metas]
    if len(name) >= PREFIX_MIN:
        starting = sorted(i for i in ids if i.startswith(name))
        if len(starting) == 1:
            _note(f"{name!r} is session {starting[0]}")
            return starting[0]
        if starting:
            raise Refused(
                f"{name!r} is the start of {len(starting)} session ids: {_listed(starting)}; "
                "give more of the id"
            )
    raise NotNamed(await _not_found(store, name, metas))


async def sessions_named(
    store: SessionStore,
    names: Sequence[str] | None,
    *,
    exact: bool = False,
    missing_ok: bool = False,
) -> list[str] | None:
    """`session_named` for each of ``names`` (None: None, as every session).

    With ``missing_ok``, a name no session has is kept as given, for a
    command that reports each session it could not find (``retire``).
    """
    if names is None:
        return None
    found = []
    for name in names:
        try:
            found.append(await session_named(store, name, exact=exact))
        except NotNamed:
            if not missing_ok:
                raise
            found.append(name)
    return found


async def _exists(store: SessionStore, session_id: str) -> bool:
    """Whether the store holds the session: its first stored line, not decoded
    (a session whose header is damaged is still there)."""
    lines = store.raw_lines(session_id)
    try:
        async for _ in lines:
            return True
    except SessionNotFoundError:
        return False
    finally:
        if isinstance(lines, AsyncGenerator):  # close the file or cursor now
            await lines.aclose()
    return False


async def _check_shadowed(store: SessionStore, name: str, head: str) -> None:
    """Refuse a name that is both a head and a session that is not the
    head's conversation's past (the head never named it)."""
    if any(move.session_id == name for move in await store.head_history(name)):
        return
    raise Refused(
        f"{name!r} names two sessions: the session {name!r}, and the conversation "
        f"(head) {name!r}, now at session {head}, which never named it: "
        f"--exact {name} takes the session, {head} the conversation's"
    )


def _note(text: str) -> None:
    err_console.print(Text(f"note: {escaped(text)}", style="dim"))


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


async def _not_found(store: SessionStore, name: str, metas: list[SessionMeta]) -> str:
    """``session not found``, with the nearest session ids, head names and
    titles (as `difflib` weighs them, any case), and where to list them all."""
    said: dict[str, str] = {}  # what is compared, lowered -> how it is suggested
    ids = [meta.id for meta in metas]
    titles = [(s.id, s.title) for s in await store.summaries(limit=_TITLED) if s.title]
    titles += [(meta.id, meta.title) for meta in metas if meta.title]
    for session_id, title in titles:  # a title now before a header's
        said.setdefault(title.lower(), f"{session_id} (titled {title!r})")
    for session_id in ids:
        said[session_id.lower()] = session_id
    heads = await store.heads()
    if not ids and not heads:
        return f"session not found: {name!r}; the store holds no session"
    for head in heads:
        said[head.lower()] = f"{head} (a conversation)"
    nearest = difflib.get_close_matches(name.lower(), said, n=_NEAREST, cutoff=0.6)
    message = f"session not found: {name!r}"
    if nearest:
        message += f"; nearest: {', '.join(said[n] for n in nearest)}"
    if len(name) < PREFIX_MIN and any(i.startswith(name) for i in ids):
        message += f"; an id prefix needs {PREFIX_MIN} characters or more"
    return message + "; `sessionstore ls` lists the sessions, `sessionstore head` the conversations"
