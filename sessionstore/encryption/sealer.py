"""`Sealer`: what an encrypted store seals and opens its records with.

It holds the master keys, the store's keyring, and the data keys and word
keys it has unwrapped (bounded caches, the least recently used dropped
first). What each record is bound to is tabled in docs/encryption.md.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sessionstore.encryption import cipher
from sessionstore.encryption.cipher import Sealed, WordKey
from sessionstore.encryption.keyring import Keyring, Scope, WrappedKey
from sessionstore.encryption.keys import MasterKeys, new_key
from sessionstore.errors import CorruptSessionError, EncryptionKeyError

__all__ = ["CACHED", "TOKENS", "WORD_KEYS", "DataKey", "Sealer", "unwrap_key"]

CACHED = 4096  # data keys a store keeps unwrapped (one per session or journal in use)

TOKENS = 65536
"""Word digests a store keeps made (a few MB): a word's HMAC costs more than
the lookup, and most words of a conversation recur."""

WORD_KEYS = 4096  # word keys a store keeps unwrapped (one per bucket of sessions in use)

_HEAD = 1 + cipher.KEY_ID_BYTES  # a sealed value's version and key id


class DataKey(NamedTuple):
    """A data key, unwrapped: its id, its cipher, and its nonce key (`cipher.seal_fixed`)."""

    key_id: bytes
    cipher: AESGCM
    nonces: bytes

    @classmethod
    def of(cls, key_id: bytes, raw: bytes) -> DataKey:
        """The data key ``key_id`` whose bytes are ``raw``."""
        return cls(key_id, AESGCM(raw), cipher.nonce_key(raw))


_K = TypeVar("_K", DataKey, WordKey)


def unwrap_key(keys: MasterKeys, found: WrappedKey, where: str) -> bytes:
    """The bytes of the data key ``found`` wraps.

    Raises:
        EncryptionKeyError: no key of ``keys`` is its master, or it does
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
    """Seals and opens one store's records. Thread-safe: a store's worker
    threads share it; its lock guards the caches alone, never a keyring call."""

    def __init__(
        self, keys: MasterKeys, keyring: Keyring, index: bytes, *, as_text: bool = True
    ) -> None:
        self.keys = keys
        self.keyring = keyring
        # A text column holds the sealed bytes' base64 (PostgreSQL), or the
        # bytes themselves (SQLite keeps a blob in any column).
        self.as_text = as_text
        self._index = index
        self._cache: OrderedDict[bytes, DataKey] = OrderedDict()
        self._lock = threading.Lock()
        self._tokens: dict[str, bytes] = {}  # word digests made, most `TOKENS`
        self._word_keys: OrderedDict[bytes, WordKey] = OrderedDict()  # most `WORD_KEYS`
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
        """A new data key and its bytes, kept in the keyring wrapped by its
        current master key (never one a rotation retired)."""
        raw, key_id = new_key(), cipher.new_key_id()
        for _ in range(3):  # a rotation between the read and the write: again
            master = self._current_master()
            wrapped = cipher.wrap(master[1], key_id, raw)
            if self.keyring.put(WrappedKey(key_id, scope, name, master[0], wrapped)):
                return self._keep(self._cache, key_id, DataKey.of(key_id, raw), CACHED), raw
            self._master = None
        raise EncryptionKeyError(
            f"keyring {self.keyring!r}: its master key changed three times while a data "
            "key was made (rotations at once?): try again"
        )

    def _masters(self) -> list[str]:
        """The keyring's `Keyring.masters`, the current first; refused when it names none."""
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

    def _keep(self, cache: OrderedDict[bytes, _K], key_id: bytes, key: _K, most: int) -> _K:
        with self._lock:
            cache[key_id] = key
            while len(cache) > most:
                cache.popitem(last=False)
        return key

    def _cached(self, cache: OrderedDict[bytes, _K], key_id: bytes) -> _K | None:
        with self._lock:
            found = cache.get(key_id)
            if found is not None:
                cache.move_to_end(key_id)
            return found

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
        cached = self._cached(self._cache, key_id)
        if cached is not None:
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
        return self._keep(self._cache, key_id, DataKey.of(key_id, raw), CACHED)

    def forget(self, key_id: bytes) -> None:
        """Drop a key from the cache (it is being destroyed)."""
        with self._lock:
            self._cache.pop(key_id, None)
            self._word_keys.pop(key_id, None)

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
        sealed = self.seal(key, kind, name, position, text.encode())
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
        """`open` of rows ``(position, stored value, ...)``, each the record
        ``kind`` of ``holder(position)``, the rest of each row as it was.

        Lean: a run of rows of one session and key (most reads) costs a
        decryption each and little more.
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

    def word(self, word: str) -> bytes:
        """The keyed hash of ``word`` under the index key (kept: words recur)."""
        found = self._tokens.get(word)
        if found is None:
            if len(self._tokens) >= TOKENS:
                self._tokens.clear()
            found = self._tokens[word] = cipher.digest(self._index, "word", word)
        return found

    def new_word_key(self, bucket: int) -> WordKey:
        """A new word key for a bucket, kept in the keyring before any token is made."""
        data, raw = self._made("words", str(bucket))
        with self._lock:
            self._cache.pop(data.key_id, None)  # no data key: a word key
        return self._keep(
            self._word_keys, data.key_id, WordKey(data.key_id, raw, bucket), WORD_KEYS
        )

    def word_key(self, key_id: bytes, bucket: int) -> WordKey:
        """The word key ``key_id`` of a bucket, from the cache or the keyring.

        Raises:
            EncryptionKeyError: the keyring does not hold it, or no key given wraps it.
        """
        cached = self._cached(self._word_keys, key_id)
        if cached is not None:
            return cached
        found = self.keyring.get(key_id)
        if found is None or found.scope != "words":
            raise EncryptionKeyError(
                f"keyring {self.keyring!r} holds no word key {key_id.hex()} of bucket "
                f"{bucket} (destroyed by an erase since it was read, or damaged)"
            )
        word_key = WordKey(key_id, self._unwrapped(found), bucket)
        return self._keep(self._word_keys, key_id, word_key, WORD_KEYS)

    def owner(self, owner: str) -> str:
        """What the listing holds for ``owner``."""
        return cipher.token(self._index, "owner", owner)

    def journal_line_key(self, journal: str, key: str) -> str:
        """What the index of keyed lines holds for ``key`` in ``journal``."""
        return cipher.token(self._index, "journal key", f"{journal}\x00{key}")

    def head_seal(self, *, name: str, seq: int, session_id: str, at: str) -> str:
        """What authenticates position ``seq`` of the head ``name`` (its session, its time)."""
        return cipher.token(self._index, "head", f"{name}\x00{seq}\x00{session_id}\x00{at}")

    # ------------------------------------------------------------ rotation

    def rotate(self) -> int:
        """Make the first master key given the keyring's current one, then
        rewrap every data key under it, one whole change a key; how many were.

        Raises:
            EncryptionKeyError: the keys are not given newest first, or a
                key's master is not among the keys given.
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
    """Record the current master of a keyring made before masters were: the
    first key given if it wraps any key, else the index key's; the others retired."""
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
