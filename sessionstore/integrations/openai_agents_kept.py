"""What `StoreSession` objects keep of a conversation's items on a store, so
that a session per request reads on from the last one (`kept_for`).

Each item is kept as openai-agents reads it and handed out as a copy of its
own: a caller changing an item changes nothing kept. docs/integrations.md
(What an adapter keeps between reads) tells the bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import Any, TypeAlias, cast

from sessionstore import MessageEntry, SessionStore
from sessionstore.integrations.kept import KeptItems, Latest

__all__ = ["CONVERSATIONS", "Item", "Kept", "kept_for"]

CONVERSATIONS = 256
"""Conversations whose items are kept at most per store object, the latest used."""

Item: TypeAlias = Callable[[str, MessageEntry], Any]
"""The item a session's message entry stands for (it raises for one it cannot read)."""


def kept_for(store: SessionStore, name: str, item: Item) -> Kept:
    """What the sessions on ``store`` keep of conversation ``name`` while the
    store object lives (`StoreBase.kept`), each item made by ``item``. A
    store without `kept` keeps nothing between sessions."""
    keep = getattr(store, "kept", None)
    if not callable(keep):
        return _new_kept(item, name)
    conversations: Latest[Kept] = keep(__name__, partial(_new_conversations, item))
    return conversations.get(name)


def _new_conversations(item: Item) -> Latest[Kept]:
    return Latest(partial(_new_kept, item), most=CONVERSATIONS, weigh=attrgetter("weight"))


def _new_kept(item: Item, name: str) -> Kept:
    return KeptItems(partial(_kept_item, item), _handed_out)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _kept_item(item: Item, session_id: str, entry: MessageEntry) -> dict[str, Any] | _Nested:
    """The item ``entry`` stands for, as kept: a plain ``dict`` when its values
    are all atoms (a plain copy is a deep one), else wrapped in `_Nested`."""
    # The garbage collector does not track a plain dict of atoms, nor its
    # copy; a dict subclass or a tuple holding one is (copies of 10,000 items
    # made a full collection every other call, 80% of its time).
    made = cast(dict[str, Any], item(session_id, entry))
    if all(type(value) in _ATOMS for value in made.values()):
        return made
    return _Nested(made)


class _Nested:
    """A kept item holding lists or objects: handed out as a deep copy."""

    __slots__ = ("item",)

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item


Kept: TypeAlias = KeptItems[dict[str, Any] | _Nested, Any]
"""One conversation's items, as kept."""


def _handed_out(kept: dict[str, Any] | _Nested) -> Any:
    """A kept item as `get_items` hands it out: a deep copy of its own."""
    if type(kept) is dict:
        return kept.copy()
    return _copied(cast(_Nested, kept).item)


def _copied(value: Any) -> Any:
    """A deep copy of a JSON value: a caller changing an item changes nothing kept."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _ATOMS else _copied(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _ATOMS else _copied(item) for item in value]
    return value
