"""Time on the wire: the journal's `Timestamp` and new session-side stamps.

Two kinds of time appear in records (SPEC section 1):

* Journal lines carry a `Timestamp`: parsed from RFC 3339 with an offset and
  written in UTC with ``Z`` and 0, 3, 6 or 9 fractional digits, the fewest
  that show every non-zero digit. It keeps nanoseconds, which a Python
  `datetime` cannot.
* Session headers and entries carry plain strings, never parsed. New ones
  come from `now_rfc3339`: UTC with a ``+00:00`` offset and the same digit
  rule.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["Timestamp", "now_rfc3339"]

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:[Zz]|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _fraction(nanos: int) -> str:
    """The fractional part with 0, 3, 6 or 9 digits, the fewest that are exact."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def _seconds_text(value: datetime) -> str:
    # strftime's %Y drops leading zeros of years below 1000 on some platforms.
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        f"T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )


def now_rfc3339() -> str:
    """The current time as a session-side stamp (``...T02:49:27.123456789+00:00``)."""
    ns = time.time_ns()
    seconds, nanos = divmod(ns, 1_000_000_000)
    return f"{_seconds_text(_EPOCH + timedelta(seconds=seconds))}{_fraction(nanos)}+00:00"


class Timestamp:
    """An instant in UTC with nanosecond precision, as the journal writes it.

    `str()` gives the canonical form (``2026-10-13T11:32:00.120Z``).
    Timestamps compare and hash by instant.
    """

    __slots__ = ("_nanos", "_seconds")

    def __init__(self, seconds: datetime, nanos: int = 0) -> None:
        """Make a timestamp from whole seconds and a nanosecond part.

        Args:
            seconds: an aware datetime; its microseconds are ignored.
            nanos: nanoseconds past the second, 0 to 999,999,999.

        Raises:
            ValueError: naive datetime or nanoseconds out of range.
        """
        if seconds.tzinfo is None or seconds.utcoffset() is None:
            raise ValueError("a timestamp needs an offset (naive datetime given)")
        if not 0 <= nanos < 1_000_000_000:
            raise ValueError(f"nanoseconds out of range: {nanos}")
        self._seconds = seconds.astimezone(UTC).replace(microsecond=0)
        self._nanos = nanos

    @classmethod
    def from_datetime(cls, value: datetime) -> Timestamp:
        """The instant of an aware datetime, microseconds kept."""
        return cls(value, value.microsecond * 1_000)

    @classmethod
    def now(cls) -> Timestamp:
        """The current instant."""
        seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
        return cls(_EPOCH + timedelta(seconds=seconds), nanos)

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        """Parse an RFC 3339 date-time that has an offset.

        ``T``, ``t`` or a space separate date and time; the offset is ``Z``,
        ``z`` or ``+hh:mm``/``-hh:mm``. Digits past the ninth fractional one
        are ignored.

        Raises:
            ValueError: not such a date-time, or one without an offset.
        """
        match = _RFC3339.fullmatch(text)
        if match is None:
            raise ValueError(f"not an RFC 3339 date-time with an offset: {text!r}")
        year, month, day, hour, minute, second, frac, sign, off_h, off_m = match.groups()
        offset = timedelta(0)
        if sign is not None:
            if int(off_m) > 59:
                raise ValueError(f"offset minutes out of range: {text!r}")
            offset = timedelta(hours=int(off_h), minutes=int(off_m))
            if sign == "-":
                offset = -offset
        try:
            local = datetime(
                int(year),
                int(month),
                int(day),
                int(hour),
                int(minute),
                int(second),
                tzinfo=timezone(offset),
            )
            utc = local.astimezone(UTC)
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"date-time out of range: {text!r} ({exc})") from None
        nanos = int(frac[:9].ljust(9, "0")) if frac else 0
        return cls(utc, nanos)

    @property
    def nanosecond(self) -> int:
        """Nanoseconds past the second."""
        return self._nanos

    def to_datetime(self) -> datetime:
        """The instant as an aware UTC datetime (nanoseconds cut to microseconds)."""
        return self._seconds.replace(microsecond=self._nanos // 1_000)

    def _key(self) -> tuple[datetime, int]:
        return (self._seconds, self._nanos)

    def __str__(self) -> str:
        return f"{_seconds_text(self._seconds)}{_fraction(self._nanos)}Z"

    def __repr__(self) -> str:
        return f"Timestamp({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Timestamp):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: Timestamp) -> bool:
        return self._key() < other._key()

    def __le__(self, other: Timestamp) -> bool:
        return self._key() <= other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @classmethod
    def _validate(cls, value: object) -> Timestamp:
        if isinstance(value, Timestamp):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, datetime):
            return cls.from_datetime(value)
        raise ValueError("expected an RFC 3339 string, a Timestamp or an aware datetime")

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.to_string_ser_schema()
        )
