"""The cipher, master keys, the SQL keyring and the sealer, below any store."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sessionstore.backends.sql.keyring import SqlKeyring
from sessionstore.encryption import cipher
from sessionstore.encryption.keys import (
    MasterKeys,
    fingerprint,
    generate_key,
    new_key,
    read_key_file,
)
from sessionstore.encryption.sealer import Sealer
from sessionstore.errors import ConfigurationError, CorruptSessionError, EncryptionKeyError


@pytest.fixture
def keyring(tmp_path: Path) -> SqlKeyring:
    return SqlKeyring(tmp_path / "store.db.keys")


def test_a_sealed_value_opens_only_where_it_was_sealed() -> None:
    key, key_id = new_key(), cipher.new_key_id()
    aead = AESGCM(key)
    sealed = cipher.seal(aead, key_id, "entry", "s1", 7, b"hello")
    assert b"hello" not in sealed
    assert cipher.sealed_key_id(sealed) == key_id
    assert cipher.open_value(aead, "entry", "s1", 7, sealed) == b"hello"
    for kind, name, position in [("entry", "s1", 8), ("entry", "s2", 7), ("title", "s1", 7)]:
        with pytest.raises(cipher.Sealed):
            cipher.open_value(aead, kind, name, position, sealed)
    flipped = bytearray(sealed)
    flipped[-1] ^= 1
    with pytest.raises(cipher.Sealed):
        cipher.open_value(aead, "entry", "s1", 7, bytes(flipped))
    with pytest.raises(cipher.Sealed):  # another key id in the head: bound too
        cipher.open_value(aead, "entry", "s1", 7, sealed[:1] + cipher.new_key_id() + sealed[13:])


def test_a_wrapped_key_opens_with_its_master_and_id_only() -> None:
    master, data, key_id = new_key(), new_key(), cipher.new_key_id()
    wrapped = cipher.wrap(master, key_id, data)
    assert cipher.unwrap(master, key_id, wrapped) == data
    with pytest.raises(cipher.Sealed):
        cipher.unwrap(new_key(), key_id, wrapped)
    with pytest.raises(cipher.Sealed):
        cipher.unwrap(master, cipher.new_key_id(), wrapped)


def test_tokens_are_equal_for_equal_words_under_one_key_only() -> None:
    one, two = new_key(), new_key()
    assert cipher.token(one, "word", "zebra") == cipher.token(one, "word", "zebra")
    assert cipher.token(one, "word", "zebra") != cipher.token(one, "owner", "zebra")
    assert cipher.token(one, "word", "zebra") != cipher.token(two, "word", "zebra")
    assert cipher.token(one, "word", "zebra").isalnum()


def test_master_keys_parse_text_and_bytes_and_refuse_the_rest(tmp_path: Path) -> None:
    text = generate_key()
    raw = base64.urlsafe_b64decode(text)
    assert MasterKeys(text).first == MasterKeys(raw).first == fingerprint(raw)
    keys = MasterKeys([generate_key(), text])
    assert keys.key(fingerprint(raw)) == raw
    assert keys.first != fingerprint(raw)
    assert text not in repr(keys)
    for bad, said in [
        ([], "holds no key"),
        ("not base64!", "is not a master key"),
        (b"short", "holds 5 bytes"),
        (42, "is a int"),
    ]:
        with pytest.raises(ConfigurationError, match=said):
            MasterKeys(bad)  # type: ignore[arg-type]
    path = tmp_path / "keys"
    path.write_text(f"# newest first\n\n{text}\n")
    assert read_key_file(path) == [text]
    path.write_text("# none\n")
    with pytest.raises(ConfigurationError, match="holds no key"):
        read_key_file(path)


def test_the_sealer_seals_and_opens_across_a_restart(keyring: SqlKeyring, tmp_path: Path) -> None:
    keys = MasterKeys(generate_key())
    sealer = Sealer.start(keys, keyring, "store-1", new=True)
    key = sealer.new_key("session", "s1")
    stored = sealer.seal_text(key, "entry", "s1", 1, '{"type":"message"}')
    token = sealer.word("zebra")
    again = Sealer.start(keys, SqlKeyring(tmp_path / "store.db.keys"), "store-1", new=False)
    assert again.open_text("entry", "s1", 1, stored) == '{"type":"message"}'
    assert again.word("zebra") == token  # the index key is the store's, kept
    with pytest.raises(CorruptSessionError, match="entry seq 2 does not open"):
        again.open_text("entry", "s1", 2, stored, where="entries")


def test_a_wrong_key_or_keyring_is_a_clear_error(keyring: SqlKeyring, tmp_path: Path) -> None:
    keys = MasterKeys(generate_key())
    Sealer.start(keys, keyring, "store-1", new=True)
    with pytest.raises(EncryptionKeyError, match="not by a key given"):
        Sealer.start(MasterKeys(generate_key()), keyring, "store-1", new=False)
    with pytest.raises(EncryptionKeyError, match="holds no keys of this store"):
        Sealer.start(keys, SqlKeyring(tmp_path / "other.keys"), "store-1", new=False)


def test_a_destroyed_key_leaves_its_values_unopenable(keyring: SqlKeyring) -> None:
    sealer = Sealer.start(MasterKeys(generate_key()), keyring, "store-1", new=True)
    key = sealer.new_key("session", "s1")
    stored = sealer.seal_text(key, "header", "s1", 0, "secret header")
    sealer.forget(key.key_id)
    keyring.destroy(key.key_id)
    with pytest.raises(CorruptSessionError, match="does not hold"):
        sealer.open_text("header", "s1", 0, stored)


def test_rotation_rewraps_every_key_under_the_first(keyring: SqlKeyring) -> None:
    old, new = generate_key(), generate_key()
    sealer = Sealer.start(MasterKeys(old), keyring, "store-1", new=True)
    key = sealer.new_key("session", "s1")
    stored = sealer.seal_text(key, "entry", "s1", 1, "line")
    rotated = Sealer.start(MasterKeys([new, old]), keyring, "store-1", new=False)
    assert rotated.rotate() == 2  # the index key and the session's
    assert rotated.rotate() == 0
    after = Sealer.start(MasterKeys(new), keyring, "store-1", new=False)
    assert after.open_text("entry", "s1", 1, stored) == "line"
    with pytest.raises(EncryptionKeyError):
        Sealer.start(MasterKeys(old), keyring, "store-1", new=False)
