"""The keyring: a store's data keys, each wrapped by a master key, kept
apart from the data they open (docs/encryption.md: when keys are put,
doomed, destroyed and rewrapped). `Keyring` is what a store needs of one;
`sessionstore.backends.sql.keyring` keeps it in a SQL database.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Literal

__all__ = ["Keyring", "Scope", "WrappedKey"]

# What a data key seals: a session, a journal, the store's index key (owners,
# heads, words' hashes), or the word tokens of a bucket of sessions (its number).
Scope = Literal["session", "journal", "index", "words"]


@dataclass(frozen=True)
class WrappedKey:
    """A data key as the keyring holds it.

    Attributes:
        key_id: its id (`cipher.KEY_ID_BYTES` random bytes).
        scope: what it seals.
        name: the session's id or the journal's name ("" for the index).
        master: the fingerprint of the master key that wrapped it.
        wrapped: the data key, wrapped (`cipher.wrap`).
        doomed: an erase is destroying it.
    """

    key_id: bytes
    scope: Scope
    name: str
    master: str
    wrapped: bytes
    doomed: bool = False


class Keyring(abc.ABC):
    """Where one store's wrapped data keys live. Blocking calls: the store
    runs them in its worker threads. Each call is whole: it happens or not.

    A keyring serves one store, named by the id the store's database holds
    (`bind`): given another store's keyring, opening fails clearly instead of
    reading nothing.
    """

    @abc.abstractmethod
    def bind(self, store_id: str, *, create: bool) -> bool:
        """Serve the store ``store_id``; with ``create``, begin serving it if
        the keyring serves none. Whether it serves that store."""

    @abc.abstractmethod
    def put(self, key: WrappedKey) -> bool:
        """Keep a new key (its id is new) if its master is the store's
        current one (the first of `masters`); whether it was kept. The check
        and the write are one: a `set_master` waits for a `put` that checked
        the master it replaces, and a `put` after it is refused."""

    @abc.abstractmethod
    def masters(self) -> list[str]:
        """The fingerprints of the master keys that wrap the store's new data
        keys: the current one first, then those rotations retired, newest
        first. Empty when none is recorded (a keyring made before
        sessionstore recorded it: the store's next open records it)."""

    @abc.abstractmethod
    def set_master(self, master: str, *, was: list[str]) -> bool:
        """Make ``master`` the current master, ``was`` (the `masters` read
        before) retired after it, if `masters` is still ``was``: of two
        rotations at once, one wins. Whether it did."""

    @abc.abstractmethod
    def get(self, key_id: bytes) -> WrappedKey | None:
        """The key of that id, None once destroyed (or never kept)."""

    def lookup(self, key_id: bytes) -> WrappedKey | None:
        """The key of that id, of whichever store the keyring serves (ids are
        random, never reused): what opens an encrypted archive's lines when
        the keyring is given apart from its store. By default `get`, which
        needs the keyring bound."""
        return self.get(key_id)

    @abc.abstractmethod
    def find(self, scope: Scope, name: str) -> WrappedKey | None:
        """The newest key kept for a journal or the index (not doomed)."""

    @abc.abstractmethod
    def doom(self, key_id: bytes) -> None:
        """Mark a key as being destroyed by an erase (it still opens)."""

    @abc.abstractmethod
    def doomed(self) -> list[WrappedKey]:
        """The keys marked doomed (few: erases under way, or cut short)."""

    @abc.abstractmethod
    def destroy(self, key_id: bytes) -> None:
        """Remove a key for good, its bytes overwritten where the medium allows."""

    @abc.abstractmethod
    def all_keys(self) -> list[WrappedKey]:
        """Every key kept, doomed ones included."""

    @abc.abstractmethod
    def rewrap(self, key_id: bytes, was: str, key: WrappedKey) -> bool:
        """Replace the wrapping of ``key_id`` with ``key``'s if a master of
        fingerprint ``was`` still wraps it and ``key.master`` is the current
        master (as `put` checks it); whether it did."""

    def close(self) -> None:  # noqa: B027 (a keyring may hold nothing to close)
        """Release what the keyring holds open."""
