"""What `retire` chooses: its filters, and the order forks leave in.

Times are compared as instants (`Timestamp`): offsets, fractions and leap
seconds included, never as strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sessionstore.errors import ConfigurationError, validate_session_id
from sessionstore.store import SessionSummary
from sessionstore.timestamps import Timestamp, given_instant

__all__ = [
    "children_first",
    "idle_since",
    "instant",
    "named",
    "verdict",
    "without_kept_forks",
]


def instant(value: object) -> Timestamp:
    """``before`` as an instant (`given_instant`)."""
    return given_instant(value, "before=")


def idle_since(idle_for: object) -> Timestamp:
    """The instant before which a session's last activity makes it idle enough."""
    if not isinstance(idle_for, timedelta) or idle_for < timedelta(0):
        raise ConfigurationError(f"idle_for= takes a timedelta of 0 or more, not {idle_for!r}")
    now = Timestamp.now().to_datetime()
    return Timestamp.from_datetime(now - idle_for)


def named(sessions: Sequence[str] | None) -> list[str] | None:
    if sessions is None:
        return None
    if isinstance(sessions, str):  # a str is a sequence of one-letter ids
        raise ConfigurationError(f"sessions= takes a list of ids, not the string {sessions!r}")
    named = list(dict.fromkeys(sessions))
    for session_id in named:
        validate_session_id(session_id)
    return named


def age(text: str | None, what: str) -> Timestamp | str:
    """The instant a stored time string names, or why it names none."""
    if not text:
        return f"its {what} is empty: its age cannot be told; left"
    try:
        return Timestamp.parse(text)
    except ValueError:
        return f"its {what} {text!r} is not an RFC 3339 time: its age cannot be told; left"


def verdict(
    summary: SessionSummary,
    cutoff: Timestamp | None,
    idle_since: Timestamp | None,
    named: list[str] | None,
) -> bool | str:
    """True when every filter chooses the session, False when one does not,
    else why it cannot be told (or, for a session that does not read back,
    why it is not retired)."""
    if named is not None and summary.meta.id not in named:
        return False
    unknown: list[str] = []
    if cutoff is not None:
        created = age(summary.meta.created_at, "created_at")
        if isinstance(created, str):
            unknown.append(created)
        elif not created < cutoff:
            return False
    if idle_since is not None:
        last, what = summary.last_timestamp, "last entry's timestamp"
        if summary.entries == 0 and summary.fault is None:
            last, what = summary.meta.created_at, "created_at (it has no entry)"
        active = age(last, what)
        if isinstance(active, str):
            unknown.append(active)
        elif idle_since < active:
            return False
    if summary.fault is not None:
        return f"its stored data does not read back ({summary.fault}); not retired"
    return unknown[0] if unknown else True


def without_kept_forks(
    chosen: set[str], children: dict[str, list[str]], parents: dict[str, str | None]
) -> tuple[set[str], dict[str, list[str]]]:
    """The chosen sessions none of whose forks stays in the store, and each
    one left for that with the forks that stay. Leaving a fork leaves its
    parent, up the family."""
    retiring = set(chosen)
    left: dict[str, list[str]] = {}
    waiting = [s for s in chosen if any(c not in chosen for c in children.get(s, []))]
    while waiting:
        session_id = waiting.pop()
        if session_id not in retiring:
            continue
        retiring.discard(session_id)
        left[session_id] = sorted(c for c in children.get(session_id, []) if c not in retiring)
        parent = parents.get(session_id)
        if parent is not None and parent in retiring:
            waiting.append(parent)
    return retiring, left


def children_first(retiring: set[str], children: dict[str, list[str]]) -> list[str]:
    """The sessions in an order where every fork comes before its parent."""
    order: list[str] = []
    seen: set[str] = set()
    for start in sorted(retiring):
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(sorted(c for c in children.get(start, []) if c in retiring)))]
        while stack:
            node, below = stack[-1]
            child = next((c for c in below if c not in seen), None)
            if child is None:
                stack.pop()
                order.append(node)
            else:
                seen.add(child)
                grand = sorted(c for c in children.get(child, []) if c in retiring)
                stack.append((child, iter(grand)))
    return order
