"""The wire codec: serde_json-identical encoding and strict decoding.

Every byte sessionstore writes goes through `encode`, and every byte it reads
is checked by one of the ``decode_*`` functions, so files and rows are
interchangeable with the Rust implementation (serde + serde_json).

Encoding (SPEC section 2) is canonical: no whitespace; UTF-8 without
``\\u`` escapes for non-ASCII; ``"`` and ``\\`` escaped; ``\\b \\f \\n \\r \\t``
as short escapes and other characters below U+0020 as ``\\u00XX`` (lowercase
hex); DEL, ``/``, U+2028 and U+2029 as themselves. Integers in i64..u64 as
digits, others as floats. Floats in the shortest form that round-trips
(ryu's, as serde_json uses): plain when 1e-5 <= |x| < 1e16 (``0.00001``,
``1.0``, ``-0.0``, ``1000000000000000.0``), otherwise ``<mantissa>e<exp>``
with no ``+`` and no padding (``1e16``, ``1e-7``, ``1.5e300``). Fields come in
the order of SPEC section 1; optional fields without a value are left out.

Decoding (SPEC section 1) is as strict as serde_json: the input must be one
JSON object in valid UTF-8, with nothing after it but whitespace. Refused:
``NaN``/``Infinity``, numbers beyond the float range (``1e400``), lone
surrogates, raw control characters in strings, a byte-order mark, invalid
UTF-8, arrays and other non-objects, nesting deeper than serde_json's limit
(127 containers), and a repeated known field or tag. Every value is checked,
even one a repeated key replaces. Unknown fields are ignored after that
check, except a session header's, which serde skips unread (JSON's grammar
only, at any depth, any number, any escape). The tag may stand anywhere,
and among a message's extra fields (and inside any JSON value) a repeated
key keeps its first position with its last value. As in serde_json, ``-0``
and integers outside i64..u64 read as floats. Journal timestamps are read
as chrono 0.4 reads them (`sessionstore.timestamps`).

Every refusal is an `InvalidRecordError` whose message says what is wrong
and where (the field path, or the line and column of the text), at any
depth of nesting: never a `RecursionError`. The few differences from
serde_json that are made on purpose are listed in docs/wire-format.md.
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
)
from sessionstore.wire.encoding import (
    Record,
    encode,
    encode_line,
    encode_string,
    encode_value,
    format_float,
)
from sessionstore.wire.keyed import line_key
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
