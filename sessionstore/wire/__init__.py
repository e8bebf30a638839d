"""The wire codec: serde_json-identical canonical encoding and strict decoding.

Every byte sessionstore writes goes through `encode`, and every byte it
reads is checked by a ``decode_*`` function or the fast reader of stored
lines (`sessionstore.wire.stored`); the rules are in docs/wire-format.md.
"""

from __future__ import annotations

from sessionstore.wire.decoding import (
    decode_anchor,
    decode_archived_key,
    decode_effect,
    decode_entry,
    decode_erasure,
    decode_head_move,
    decode_journal_line,
    decode_message,
    decode_meta,
    decode_title_change,
    decode_value,
    line_key,
)
from sessionstore.wire.encoding import (
    Record,
    encode,
    encode_line,
    encode_string,
    encode_value,
    format_float,
)
from sessionstore.wire.limits import MAX_DEPTH, MAX_LINE

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE",
    "Record",
    "decode_anchor",
    "decode_archived_key",
    "decode_effect",
    "decode_entry",
    "decode_erasure",
    "decode_head_move",
    "decode_journal_line",
    "decode_message",
    "decode_meta",
    "decode_title_change",
    "decode_value",
    "encode",
    "encode_line",
    "encode_string",
    "encode_value",
    "format_float",
    "line_key",
]
