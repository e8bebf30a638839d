"""`line_key`: the key a journal line is indexed under, as the strict decoder reads it."""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import Effect, InvalidRecordError, encode
from sessionstore.wire import decode_effect, decode_value, line_key

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


def reference(line: bytes) -> str | None:
    """What the strict decoder reads as the key, spelled out: None unless
    the line is one object with a single top-level "key" holding a string."""
    try:
        value = decode_value(line)
    except InvalidRecordError:
        return None
    pairs: list[Any] = json.loads(line, object_pairs_hook=lambda p: p)
    named = [item for name, item in pairs if name == "key"] if isinstance(value, dict) else []
    return named[0] if len(named) == 1 and isinstance(named[0], str) else None


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["key", "k", "value", "kéy"]), values), st.booleans())
def test_line_key_agrees_with_the_strict_decoder(obj: dict[str, Any], ascii_only: bool) -> None:
    line = json.dumps(obj, ensure_ascii=ascii_only).encode()
    assert line_key(line) == reference(line)


@settings(max_examples=100, deadline=None)
@given(st.text(), st.text())
def test_an_effect_line_is_keyed_under_the_key_its_decoder_reads(key: str, tool: str) -> None:
    line = encode(Effect(effect="intent", key=key, tool=tool, at="2026-01-01T00:00:00Z")).encode()
    assert line_key(line) == decode_effect(line).key == key


@pytest.mark.parametrize(
    ("line", "key"),
    [
        (b'{"key":"a"}', "a"),
        (b'{"k\\u0065y":"a"}', "a"),
        (b'{"key":"\\u00e9"}', "\u00e9"),
        (b' {"key":"a"}\r', "a"),
        (b'{"key":"a","key":"a"}', None),
        (b'{"key":"a","k\\u0065y":"b"}', None),
        (b'{"x":{"key":"a"}}', None),
        (b'{"key":"a"', None),
        (b'{"key":["a"]}', None),
        (b'{"key":"a","n":1e400}', None),
        (b'{"key":"a","n":-Infinity}', None),
        (b'{"key":"a","s":"\\udc00"}', None),
        (b'{"key":"a"}{}', None),
        (b'\xef\xbb\xbf{"key":"a"}', None),
        (b'{"key":"\xff"}', None),
        (b'"key"', None),
        (b"", None),
        (b'{"line":"post"}', None),
        (b"[" * 200 + b'{"key":"a"}' + b"]" * 200, None),
        (b'{"key":"a","deep":' + b"[" * 127 + b"]" * 127 + b"}", None),
    ],
)
def test_line_key_of_edge_cases(line: bytes, key: str | None) -> None:
    assert line_key(line) == key
    assert line_key(line) == reference(line)
