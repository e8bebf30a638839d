"""What serde_json allows, which both directions of the wire codec keep to."""

from __future__ import annotations

import re

__all__ = ["I64_MIN", "MAX_DEPTH", "SURROGATE", "U64_MAX"]

I64_MIN = -(2**63)
U64_MAX = 2**64 - 1
"""Integers in I64_MIN..U64_MAX are integers to serde_json; others are floats."""

MAX_DEPTH = 127
"""serde_json refuses to enter a 128th nested array or object."""

SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: text UTF-8 cannot carry."""
