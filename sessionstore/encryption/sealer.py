"""`Sealer`: what an encrypted store seals and opens its records with.

It holds the master keys, the store's keyring and the data keys it has
unwrapped (a bounded cache: at most `CACHED` keys, the least recently used
dropped first). Records are sealed per kind, bound to their session or
journal and position (`cipher.seal`):

=========  =============  ==========================================
kind       name           position
=========  =============  ==========================================
header     session id     0
entry      session id     seq (the session holding the row as its own)
title      session id     the title change's seq
journal    journal name   the line's seq
=========  =============  ==========================================

Words and owners become tokens under the index key (`cipher.token`), and
each position of a head is authenticated under it (`Sealer.head_seal`).
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sessionstore.encryption import cipher
from sessionstore.encryption.cipher import Sealed
from sessionstore.encryption.keyring import Keyring, Scope, WrappedKey
from sessionstore.encryption.keys import MasterKeys, new_key
from sessionstore.errors import CorruptSessionError, EncryptionKeyError

__all__ = ["CACHED", "TOKENS", "DataKey", "Sealer", "unwrap_key"]

CACHED = 4096
"""Data keys a store keeps unwrapped (one per session or journal in use)."""

TOKENS = 65536
"""Word tokens a store keeps made (a few MB): a word's HMAC costs more than
the lookup, and most words of a conversation recur."""

_HEAD = 1 + cipher.KEY_ID_BYTES  # a sealed value's version and key id


class DataKey(NamedTuple):
    """A data key, unwrapped: its id, its cipher, and the key its
    deterministic nonces are derived with (`cipher.seal_fixed`)."""

    key_id: bytes
    cipher: AESGCM
    nonces: bytes

    @classmethod
    def of(cls, key_id: bytes, raw: bytes) -> DataKey:
        """The data key ``key_id`` whose bytes are ``raw``."""
        return cls(key_id, AESGCM(raw), cipher.nonce_key(raw))


def unwrap_key(keys: MasterKeys, found: WrappedKey, where: str) -> bytes:
    """The bytes of the data key ``found`` wraps, unwrapped by the master
    key that wrapped it.

    Raises:
        EncryptionKeyError: no key of ``keys`` is that master, or it does
            not open (changed); the message names ``where`` it was found.
    """
    master = keys.key(found.master)
    if master is None:
        given = ", ".join(keys.fingerprints)
        raise EncryptionKeyError(
            f"data key {found.key_id.hex()} is wrapped by master key {found.master}, "
            f"not by a key given ({given})"
        )
    try:
        return cipher.unwrap(master, found.key_id, found.wrapped)
    except Sealed as exc:
        raise EncryptionKeyError(f"data key {found.key_id.hex()} in {where}: {exc}") from None


class Sealer:
    """Seals and opens one store's records; see the module docstring.

    Thread-safe: a store's worker threads share it. Its lock guards the
    cache alone, never a keyring call.
    """

    def __init__(
        self, keys: MasterKeys, keyring: Keyring, index: bytes, *, as_text: bool = True
    ) -> None:
        self.keys = keys
        self.keyring = keyring
        self.as_text = as_text
        """Whether what a text column holds is the sealed bytes' base64 (it
        must be text: PostgreSQL), or the bytes themselves (SQLite keeps a
        blob in any column, and spares the encoding)."""
        self._index = index
        self._cache: OrderedDict[bytes, DataKey] = OrderedDict()
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}  # word tokens made, most `TOKENS`
        self._master: str | None = None  # the keyring's current master, as last read

    @classmethod
    def start(
        cls, keys: MasterKeys, keyring: Keyring, store_id: str, *, new: bool, as_text: bool = True
    ) -> Sealer:
        """The sealer of the store ``store_id``: the keyring bound to it (made
        to serve it when ``new``), the index key found or made.

        Raises:
            EncryptionKeyError: the keyring serves another store, or no key
                given opens the store's keys.
        """
        if not keyring.bind(store_id, create=new):
            raise EncryptionKeyError(
                f"keyring {keyring!r} holds no keys of this store ({store_id}): "
                "give the keyring made with it"
            )
        if new:
            keyring.set_master(keys.first, was=[])
        elif not keyring.masters():
            _record_masters(keys, keyring)
        sealer = cls(keys, keyring, b"", as_text=as_text)
        found = keyring.find("index", "")
        if found is None:
            if not new:
                raise EncryptionKeyError(
                    f"keyring {keyring!r} holds no index key of store {store_id}: "
                    "it is damaged, or not the one made with the store"
                )
            sealer._index = sealer._made("index", "")[1]
        else:
            sealer._index = sealer._unwrapped(found)
        return sealer

    # ------------------------------------------------------------ keys

    def _unwrapped(self, found: WrappedKey) -> bytes:
        return unwrap_key(self.keys, found, f"keyring {self.keyring!r}")

    def _made(self, scope: Scope, name: str) -> tuple[DataKey, bytes]:
        """A new data key, kept in the keyring: it, and its bytes. It is
        wrapped by the keyring's current master key (which a rotation sets),
        never by one a rotation retired.

        Raises:
            EncryptionKeyError: the current master key is not among the keys
                given (the store was rotated to a key this one lacks).
        """
        raw, key_id = new_key(), cipher.new_key_id()
        for _ in range(3):  # a rotation between the read and the write: again
            master = self._current_master()
            wrapped = cipher.wrap(master[1], key_id, raw)
            if self.keyring.put(WrappedKey(key_id, scope, name, master[0], wrapped)):
                return self._keep(DataKey.of(key_id, raw)), raw
            self._master = None
        raise EncryptionKeyError(
            f"keyring {self.keyring!r}: its master key changed three times while a data "
            "key was made (rotations at once?): try again"
        )

    def _masters(self) -> list[str]:
        """The keyring's `Keyring.masters`, the current first.

        Raises:
            EncryptionKeyError: it names none.
        """
        masters = self.keyring.masters()
        if not masters:
            raise EncryptionKeyError(
                f"keyring {self.keyring!r} names no current master key: it is damaged, "
                "or not the one made with the store"
            )
        return masters

    def _current_master(self) -> tuple[str, bytes]:
        """The keyring's current master key: its fingerprint and bytes."""
        if self._master is None:
            self._master = self._masters()[0]
        raw = self.keys.key(self._master)
        if raw is None:
            raise EncryptionKeyError(
                f"the store's keys were rotated to master key {self._master}, which this "
                f"store was not opened with ({', '.join(self.keys.fingerprints)}): it makes no "
                "new data key under a retired key; reopen it with the new key first"
            )
        return self._master, raw

    def _keep(self, key: DataKey) -> DataKey:
        with self._lock:
            self._cache[key.key_id] = key
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)
        return key

    def new_key(self, scope: Scope, name: str) -> DataKey:
        """A new data key for a new session (or journal), kept in the keyring
        before anything is sealed with it."""
        return self._made(scope, name)[0]

    def journal_key(self, name: str) -> DataKey:
        """The key the journal ``name`` seals its lines with (new if none)."""
        found = self.keyring.find("journal", name)
        if found is None:
            return self.new_key("journal", name)
        return self.key(found.key_id, what=("journal", name))

    def key(self, key_id: bytes, *, what: tuple[str, str]) -> DataKey:
        """The data key ``key_id``, from the cache or unwrapped from the keyring.

        Raises:
            CorruptSessionError: the keyring holds no such key (erased, or
                another store's keyring), or its wrapped key does not open
                with the master key it names (damaged), naming ``what``
                (kind, name).
            EncryptionKeyError: no key given wraps it.
        """
        with self._lock:
            cached = self._cache.get(key_id)
            if cached is not None:
                self._cache.move_to_end(key_id)
                return cached
        found = self.keyring.get(key_id)
        if found is None:
            raise CorruptSessionError(
                what[1],
                f"its {what[0]} is sealed by data key {key_id.hex()}, which keyring "
                f"{self.keyring!r} does not hold (destroyed by an erase, or another "
                "store's keyring)",
            )
        try:
            raw = self._unwrapped(found)
        except EncryptionKeyError as exc:
            if self.keys.key(found.master) is None:
                raise  # a master key not given: the keys, not the session
            raise CorruptSessionError(
                what[1], f"its {what[0]}'s data key is damaged: {exc}"
            ) from None
        return self._keep(DataKey.of(key_id, raw))

    def forget(self, key_id: bytes) -> None:
        """Drop a key from the cache (it is being destroyed)."""
        with self._lock:
            self._cache.pop(key_id, None)

    def destroy(self, key_id: bytes) -> None:
        """Destroy a key: out of the cache, then out of the keyring."""
        self.forget(key_id)
        self.keyring.destroy(key_id)

    # ------------------------------------------------------------ values

    def seal(self, key: DataKey, kind: str, name: str, position: int, data: bytes) -> bytes:
        """``data`` sealed under ``key`` for the record ``kind`` of ``name`` at ``position``."""
        return cipher.seal(key.cipher, key.key_id, kind, name, position, data)

    def seal_text(
        self, key: DataKey, kind: str, name: str, position: int, text: str
    ) -> str | bytes:
        """`seal` of a text, as a text column keeps it (`as_text`)."""
        sealed = cipher.seal(key.cipher, key.key_id, kind, name, position, text.encode())
        return base64.b64encode(sealed).decode("ascii") if self.as_text else sealed

    def key_of(self, value: bytes | str, kind: str, name: str) -> DataKey:
        """The data key a stored value (sealed bytes, or their base64) was sealed with."""
        return self.key(cipher.sealed_key_id(self._bytes(value, kind, name, 0)), what=(kind, name))

    def open(
        self, kind: str, name: str, position: int, value: bytes | str, *, where: str | None = None
    ) -> bytes:
        """The data of a stored value (sealed bytes, or their base64 text).

        Raises:
            CorruptSessionError: it does not open as that record (changed,
                moved, another key), naming it and ``where`` it is kept.
        """
        sealed = self._bytes(value, kind, name, position, where)
        try:
            key = self.key(cipher.sealed_key_id(sealed), what=(kind, name))
            return cipher.open_value(key.cipher, kind, name, position, sealed)
        except Sealed as exc:
            raise _corrupt(kind, name, position, str(exc), where) from None

    def open_text(
        self, kind: str, name: str, position: int, value: bytes | str, *, where: str | None = None
    ) -> str:
        """`open` of a sealed text."""
        data = self.open(kind, name, position, value, where=where)
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise _corrupt(kind, name, position, f"not UTF-8: {exc}", where) from None

    def open_rows(
        self,
        kind: str,
        holder: Callable[[int], str],
        rows: Iterable[Any],
        where: str | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """Rows ``(position, stored value, ...)`` with their values opened (as
        bytes), each as the record ``kind`` of ``holder(position)``; the rest
        of each row as it was. `open` for many rows, lean: a run of rows of
        one session and key (most reads) costs a decryption each and little
        more.

        Raises:
            CorruptSessionError: a value does not open as its record.
        """
        head = b""  # version and key id of the run of rows before
        run_name = ""
        aead: AESGCM | None = None
        bound = b""  # head, then the run's part of the associated data
        for row in rows:
            position, value = row[0], row[1]
            name = holder(position)
            if type(value) is not bytes or value[:1] != cipher.VERSION:
                value = self._bytes(value, kind, name, position, where)
            if aead is None or name != run_name or not value.startswith(head):
                head, run_name = value[:_HEAD], name
                aead = self.key(value[1:_HEAD], what=(kind, name)).cipher
                bound = head + f"sessionstore\x00{kind}\x00{name}\x00".encode()
            try:
                data = aead.decrypt(
                    value[_HEAD : _HEAD + 12], value[_HEAD + 12 :], bound + b"%d" % position
                )
            except (InvalidTag, ValueError):
                self.open(kind, name, position, value, where=where)  # raises, naming why
                raise AssertionError("a value failed to open, then opened") from None
            yield (position, data) if len(row) == 2 else (position, data, *row[2:])

    @staticmethod
    def _bytes(
        value: bytes | str, kind: str, name: str, position: int, where: str | None = None
    ) -> bytes:
        try:
            return cipher.stored(value)
        except Sealed as exc:
            raise _corrupt(kind, name, position, str(exc), where) from None

    # ------------------------------------------------------------ tokens

    def word(self, word: str) -> str:
        """What the word index holds for ``word`` (kept: words recur)."""
        found = self._tokens.get(word)
        if found is None:
            if len(self._tokens) >= TOKENS:
                self._tokens.clear()
            found = self._tokens[word] = cipher.token(self._index, "word", word)
        return found

    def owner(self, owner: str) -> str:
        """What the listing holds for ``owner``."""
        return cipher.token(self._index, "owner", owner)

    def journal_line_key(self, journal: str, key: str) -> str:
        """What the index of keyed lines holds for ``key`` in ``journal``:
        equal keys of one journal give equal tokens, nothing else shows."""
        return cipher.token(self._index, "journal key", f"{journal}\x00{key}")

    def head_seal(self, *, name: str, seq: int, session_id: str, at: str) -> str:
        """What authenticates position ``seq`` of the head ``name``: a keyed
        hash of it, the session it names and its time."""
        return cipher.token(self._index, "head", f"{name}\x00{seq}\x00{session_id}\x00{at}")

    # ------------------------------------------------------------ rotation

    def rotate(self) -> int:
        """Make the first master key given the keyring's current one, then
        rewrap every data key not wrapped by it under it; how many were.
        Each key's change is whole: stopped anywhere, every key is wrapped
        by the old master or the new, and run again it goes on. From the
        first step on, no store makes a new data key under the old master.

        Raises:
            EncryptionKeyError: the keys are not given newest first (the
                first was retired by an earlier rotation, or the current
                master is not given, or a key given after the first never
                wrapped this store's keys while nothing is left to rewrap),
                or a key's master is not among the keys given.
        """
        first, given = self.keys.first, self.keys.fingerprints
        masters = self._masters()
        current, retired = masters[0], masters[1:]
        order = "give the keys newest first: the new key, then the old"
        if first in retired:
            raise EncryptionKeyError(
                f"the first key given ({first}) was retired by an earlier rotation to "
                f"{current}: {order}"
            )
        if first != current:
            if current not in given:
                raise EncryptionKeyError(
                    f"the store's current master key {current} is not among the keys given "
                    f"({', '.join(given)}): {order}"
                )
            if not self.keyring.set_master(first, was=masters):
                raise EncryptionKeyError(
                    f"keyring {self.keyring!r}: another rotation changed its master key "
                    "meanwhile: run it again"
                )
        self._master = first
        pending = [found for found in self.keyring.all_keys() if found.master != first]
        never = [fp for fp in given if fp != first and fp not in retired]
        if not pending and first == current and never:
            raise EncryptionKeyError(
                f"nothing to rotate: every data key is wrapped by the first key given "
                f"({first}), and {', '.join(never)}, given after it, never wrapped any: if it "
                f"is the new key, {order}"
            )
        done = 0
        for found in pending:
            raw = self._unwrapped(found)
            wrapped = cipher.wrap(self.keys.wrapping(), found.key_id, raw)
            new = WrappedKey(found.key_id, found.scope, found.name, first, wrapped)
            done += self.keyring.rewrap(found.key_id, found.master, new)
        return done


def _record_masters(keys: MasterKeys, keyring: Keyring) -> None:
    """Record the current master of a keyring that names none (made before
    sessionstore recorded it): the first key given if it wraps any of the
    store's keys, else the one that wraps the index key; the others that
    wrap keys, as retired."""
    wrapping = {found.master: found.scope for found in keyring.all_keys()}
    index = keyring.find("index", "")
    current = keys.first if keys.first in wrapping or index is None else index.master
    retired = [master for master in wrapping if master != current]
    if keyring.set_master(current, was=[]) and retired:
        keyring.set_master(current, was=[current, *retired])


def _corrupt(
    kind: str, name: str, position: int, reason: str, where: str | None
) -> CorruptSessionError:
    place = {"header": "its header", "entry": f"entry seq {position}"}.get(
        kind, f"{kind} {position}"
    )
    return CorruptSessionError(name, f"{place} does not open: {reason}", path=where)
