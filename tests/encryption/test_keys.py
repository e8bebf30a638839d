"""Master keys are parsed strictly: 44 characters of URL-safe base64 that
decode to 32 bytes, and nothing else (docs/encryption.md, Keys)."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path

import pytest

from sessionstore import ConfigurationError, EncryptionKeyError, generate_key
from sessionstore.encryption.keys import KEY_FILE_BYTES, MasterKeys, parse_key, read_key_file
from tests.kinds import TEST_KEYS

KEY = TEST_KEYS[0]


def test_every_generated_key_and_the_test_key_parse() -> None:
    for _ in range(500):
        key = generate_key()
        assert parse_key(key) == base64.urlsafe_b64decode(key)
    assert len(parse_key(KEY)) == 32
    assert len(parse_key(f"  {KEY}\n")) == 32  # whitespace around it is not part of it


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("!" * 44, r"character 1 \(of 44\) is not URL-safe base64"),
        (KEY[:20] + "#" + KEY[21:], r"character 21 \(of 44\) is not URL-safe base64"),
        (KEY[:20] + " " + KEY[20:], r"character 21 \(of 45\) is whitespace"),
        (KEY[:20] + "\t" + KEY[21:], r"character 21 \(of 44\) is whitespace"),
        (KEY[:20] + "+" + KEY[21:], r"character 21 \(of 44\) is not URL-safe base64"),
        (KEY[:20] + "=" + KEY[21:], r"character 21 \(of 44\) is padding \(=\) before the end"),
        (KEY[:-1], "43 characters, not 44"),
        (KEY[:-1] + "AAAA=", "48 characters, not 44"),
        (KEY[:-1] + "A", "does not end with its padding"),
        (KEY[:42] + "F=", "its character 43 holds bits no key has"),
        ("", "0 characters, not 44"),
    ],
)
def test_a_key_that_is_not_exactly_a_key_is_refused_naming_the_fault_not_the_key(
    text: str, said: str
) -> None:
    with pytest.raises(EncryptionKeyError, match=said) as caught:
        MasterKeys([KEY, text])
    assert str(caught.value).startswith("key 2 is not a master key: ")
    assert KEY[:20] not in str(caught.value)  # never the key, nor most of it


def test_a_bad_key_in_a_key_file_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "store.key"
    path.write_text(f"# newest first\n{generate_key()}\n\n{KEY[:30]}\n")
    with pytest.raises(EncryptionKeyError, match=r"line 4 of key file '.*store.key'.*30 char"):
        read_key_file(path)


def test_a_fifo_as_key_file_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_key_file(fifo)
        except ConfigurationError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=60)  # a hang, not a speed: the refusal takes microseconds
    if reader.is_alive():  # a blocking open waits for a writer: give it one, to end the thread
        with open(fifo, "w"):
            pass
        reader.join()
    assert outcome, "reading a FIFO as a key file hung"
    assert "is not a regular file" in str(outcome[0])
    assert str(fifo) in str(outcome[0])


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_as_key_file_is_refused(device: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"key file '{device}' is not a regular file"):
        read_key_file(device)


def test_a_key_file_past_the_bound_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.key"
    path.write_text(f"{generate_key()}\n" + "#" * KEY_FILE_BYTES)
    with pytest.raises(ConfigurationError, match=rf"larger than {KEY_FILE_BYTES} bytes"):
        read_key_file(path)
    path.write_bytes(b"\xff\xfe not text")
    with pytest.raises(ConfigurationError, match="not UTF-8 text"):
        read_key_file(path)


def test_a_symlink_to_a_key_file_reads_as_the_file(tmp_path: Path) -> None:
    target = tmp_path / "secret" / "store.key"
    target.parent.mkdir()
    target.write_text(f"{KEY}\n")
    (tmp_path / "store.key").symlink_to(target)  # as an orchestrator mounts a secret
    assert read_key_file(tmp_path / "store.key") == [KEY]
