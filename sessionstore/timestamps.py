"""Time on the wire: the journal's `Timestamp` and new session-side stamps.

Two kinds of time appear in records (SPEC section 1):

* Journal lines carry a `Timestamp`, read and written as chrono 0.4 reads and
  writes a ``DateTime<Utc>`` through serde: parsed from an RFC 3339 date-time
  with an offset and written in UTC with ``Z`` and 0, 3, 6 or 9 fractional
  digits, the fewest that show every non-zero digit. It keeps nanoseconds
  and leap seconds, and years outside 1-9999, which a Python `datetime`
  cannot.
* Session headers and entries carry plain strings, never parsed. New ones
  come from `now_rfc3339`: UTC with a ``+00:00`` offset and the same digit
  rule.

What chrono reads (its ``FromStr`` for ``DateTime<FixedOffset>``, chrono
0.4.23 and every 0.4 release before 0.4.27, which began to take a lowercase
``t``) is RFC 3339 loosely: whitespace may stand before any number and
between the parts, numbers need not be zero-padded (``2026-1-5 1:2:3Z``), a
year has up to four digits or a sign and any number of them (``+10000``,
``-0001``), the offset is ``Z``, ``z``, ``UTC`` in any case, or a sign, two
hour digits, any colons and whitespace, and two minute digits (``+02:00``,
``+0200``, ``+02 00``), below a day. ``T`` or a space separates the date and
the time; a lowercase ``t`` does not. A second ``60`` is a leap second, at
any minute, and stays one in UTC (written ``:60``). The instant is taken in
UTC even where the offset moves it out of 0001-9999: ``0000-12-31T23:59:00Z``,
``-0001-12-31T23:59:00Z``, ``+10000-01-01T00:00:00Z``.

A time a user gives (``retire(before=)``, a policy's ``created_before=``,
``EffectLog.forget``, the command line's ``--before`` and ``--forget-before``)
is read by `given_instant`: those date-times (and a lowercase ``t``, as RFC
3339 allows), or a date alone (its midnight UTC); a time of day without an
offset is refused.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["Timestamp", "age_in_words", "given_instant", "now_rfc3339", "rfc3339_of_ns"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NANOS = 1_000_000_000
_DAY = 86_400

# chrono's NaiveDate holds years -262144..=262143 (i32 >> 13).
_MIN_YEAR = -262_144
_MAX_YEAR = 262_143

# Rust's char::is_whitespace (Unicode White_Space), which chrono trims.
_WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_DIGITS = frozenset("0123456789")
_SCALE = (0, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1)


def age_in_words(age: timedelta) -> str:
    """``90d``, ``1d 12h``, ``2h 5m``, ``40s``: an age in its two largest
    units, as the command line writes it (below zero: ``0s``)."""
    seconds = max(0, int(age.total_seconds()))
    days, rest = divmod(seconds, _DAY)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    for big, big_unit, small, small_unit in (
        (days, "d", hours, "h"),
        (hours, "h", minutes, "m"),
        (minutes, "m", seconds, "s"),
    ):
        if big:
            return f"{big}{big_unit} {small}{small_unit}" if small else f"{big}{big_unit}"
    return f"{seconds}s"


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date, for any year."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of a day count from 1970-01-01."""
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


_MIN_SECONDS = _days_from_civil(_MIN_YEAR, 1, 1) * _DAY
_MAX_SECONDS = (_days_from_civil(_MAX_YEAR, 12, 31) + 1) * _DAY - 1


def _fraction(nanos: int) -> str:
    """The fractional part with 0, 3, 6 or 9 digits, the fewest that are exact."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def _text(seconds: int, nanos: int) -> str:
    """UTC seconds since the epoch (the :59 of a leap second, whose nanos are
    1e9 on) and nanoseconds as RFC 3339 text, without the offset."""
    days, of_day = divmod(seconds, _DAY)
    year, month, day = _civil_from_days(days)
    hour, rest = divmod(of_day, 3600)
    minute, second = divmod(rest, 60)
    if nanos >= _NANOS:
        second, nanos = second + 1, nanos - _NANOS
    # chrono writes four digits in 0..=9999 and a sign with at least four
    # digits outside; strftime's %Y drops leading zeros on some platforms.
    year_text = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    return (
        f"{year_text}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{_fraction(nanos)}"
    )


def now_rfc3339() -> str:
    """The current time as a session-side stamp (``...T02:49:27.123456789+00:00``)."""
    return rfc3339_of_ns(time.time_ns())


def rfc3339_of_ns(ns: int) -> str:
    """A time in nanoseconds since the epoch (a file's ``st_mtime_ns``) as
    `now_rfc3339` writes it."""
    return _text(*divmod(ns, _NANOS)) + "+00:00"


class _OutOfRange(ValueError):
    """A date-time written right whose date, time or offset does not exist."""


class _Scan:
    """chrono 0.4.23's scanner over one date-time string; any misstep is a ValueError."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self) -> ValueError:
        return ValueError(f"not an RFC 3339 date-time with an offset: {self.text!r}")

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def space(self) -> None:
        text, at = self.text, self.at
        while at < len(text) and text[at] in _WHITESPACE:
            at += 1
        self.at = at

    def literal(self, char: str) -> None:
        self.space()
        if self.peek() != char:
            raise self.fail()
        self.at += 1

    def digits(self, most: int | None) -> int:
        """One or more ASCII digits, at most ``most`` of them (chrono's scan::number)."""
        text, start = self.text, self.at
        end = start
        while end < len(text) and text[end] in _DIGITS and (most is None or end - start < most):
            end += 1
        if end == start:
            raise self.fail()
        self.at = end
        return int(text[start:end])

    def number(self, width: int) -> int:
        self.space()
        return self.digits(width)

    def year(self) -> int:
        self.space()
        sign = self.peek()
        if sign in ("+", "-"):
            self.at += 1
            value = self.digits(None)  # a sign lets a year have any number of digits
            return -value if sign == "-" else value
        return self.digits(4)

    def nanoseconds(self) -> int:
        if self.peek() != ".":
            return 0
        self.at += 1
        start = self.at
        value = self.digits(9) * _SCALE[self.at - start]
        while self.peek() in _DIGITS:  # digits past the ninth are dropped
            self.at += 1
        return value

    def offset(self) -> int:
        """The offset in seconds: ``Z``, ``UTC`` or ``±hh[: ]*mm`` (any colons and spaces)."""
        self.space()
        text, at = self.text, self.at
        first = self.peek()
        if first in ("Z", "z"):
            self.at += 1
            return 0
        if first in ("U", "u"):
            if text[at + 1 : at + 3].lower() == "tc" and text[at + 1 : at + 3].isascii():
                self.at += 3
                return 0
            raise self.fail()
        if first not in ("+", "-"):
            raise self.fail()
        hours = text[at + 1 : at + 3]
        if len(hours) != 2 or not (hours[0] in _DIGITS and hours[1] in _DIGITS):
            raise self.fail()
        at += 3
        while at < len(text) and (text[at] == ":" or text[at] in _WHITESPACE):
            at += 1
        minutes = text[at : at + 2]
        if len(minutes) != 2 or minutes[0] not in "012345" or minutes[1] not in _DIGITS:
            raise self.fail()
        self.at = at + 2
        seconds = int(hours) * 3600 + int(minutes) * 60
        return -seconds if first == "-" else seconds


class Timestamp:
    """An instant in UTC with nanosecond precision, as chrono's ``DateTime<Utc>``.

    `str()` gives the canonical form (``2026-10-13T11:32:00.120Z``), leap
    seconds (``:60``) and years outside 1-9999 kept. Timestamps compare and
    hash by instant, a leap second after the second it extends.
    """

    __slots__ = ("_nanos", "_seconds")

    _seconds: int  # UTC seconds since 1970-01-01T00:00:00 (the :59 of a leap second)
    _nanos: int  # 0..1_999_999_999; a leap second from 1_000_000_000 on, as chrono

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
        if not 0 <= nanos < _NANOS:
            raise ValueError(f"nanoseconds out of range: {nanos}")
        self._seconds = (seconds.replace(microsecond=0) - _EPOCH) // timedelta(seconds=1)
        self._nanos = nanos

    @classmethod
    def _at(cls, seconds: int, nanos: int) -> Timestamp:
        made = cls.__new__(cls)
        made._seconds = seconds
        made._nanos = nanos
        return made

    @classmethod
    def from_datetime(cls, value: datetime) -> Timestamp:
        """The instant of an aware datetime, microseconds kept."""
        return cls(value, value.microsecond * 1_000)

    @classmethod
    def now(cls) -> Timestamp:
        """The current instant."""
        seconds, nanos = divmod(time.time_ns(), _NANOS)
        return cls._at(seconds, nanos)

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        """Parse a date-time with an offset as chrono 0.4 (before 0.4.27) does:
        RFC 3339 and the looser spellings the module docstring lists (digits
        past the ninth fractional one dropped).

        Raises:
            ValueError: not such a date-time, one without an offset, or one
                out of chrono's range.
        """
        scan = _Scan(text)
        year = scan.year()
        scan.literal("-")
        month = scan.number(2)
        scan.literal("-")
        day = scan.number(2)
        if scan.peek() not in ("T", " "):  # not "t", which chrono takes from 0.4.27 on
            raise scan.fail()
        scan.at += 1
        hour = scan.number(2)
        scan.literal(":")
        minute = scan.number(2)
        scan.literal(":")
        second = scan.number(2)
        nanos = scan.nanoseconds()
        offset = scan.offset()
        scan.space()
        if scan.at != len(text):
            raise scan.fail()
        if not _MIN_YEAR <= year <= _MAX_YEAR or not 1 <= month <= 12:
            raise _OutOfRange(f"date out of range: {text!r}")
        if not 1 <= day <= _days_in_month(year, month):
            raise _OutOfRange(f"date out of range: {text!r}")
        if hour > 23 or minute > 59 or second > 60 or not -_DAY < offset < _DAY:
            raise _OutOfRange(f"time out of range: {text!r}")
        if second == 60:  # a leap second: the 59th, extended (chrono's frac >= 1e9)
            second, nanos = 59, nanos + _NANOS
        local = _days_from_civil(year, month, day) * _DAY + hour * 3600 + minute * 60 + second
        utc = local - offset
        if not _MIN_SECONDS <= utc <= _MAX_SECONDS:
            raise _OutOfRange(f"date-time out of range in UTC: {text!r}")
        return cls._at(utc, nanos)

    @property
    def nanosecond(self) -> int:
        """Nanoseconds past the second; from 1,000,000,000 on in a leap second, as chrono."""
        return self._nanos

    @property
    def is_leap_second(self) -> bool:
        """Whether this instant is in a leap second (written ``:60``)."""
        return self._nanos >= _NANOS

    def to_datetime(self) -> datetime:
        """The instant as an aware UTC datetime, nanoseconds cut to microseconds
        (a leap second reads as the last microsecond of the second before).

        Raises:
            ValueError: the year is outside 1-9999, which a datetime cannot hold.
        """
        micros = 999_999 if self._nanos >= _NANOS else self._nanos // 1_000
        try:
            return _EPOCH + timedelta(seconds=self._seconds, microseconds=micros)
        except OverflowError:
            raise ValueError(f"{self} is outside the years a datetime can hold") from None

    def _key(self) -> tuple[int, int]:
        return (self._seconds, self._nanos)

    def __str__(self) -> str:
        return _text(self._seconds, self._nanos) + "Z"

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


_DATE_ALONE = re.compile(r"\s*\d{4}-\d{2}-\d{2}\s*")
_LOWERCASE_T = re.compile(r"(?<=[0-9])t(?=\s*[0-9])")  # between a date's day and its hour
_FORMS = "2026-12-01 (its midnight UTC), 2026-12-01T09:00:00Z or 2026-12-01T09:00:00+01:00"


def given_instant(value: object, what: str | None = None) -> Timestamp:
    """A time a user gives, as an instant: the one rule of every option that
    takes one (docs/cli.md, "Dates").

    It takes a `Timestamp`; an aware `datetime`; a date alone,
    ``YYYY-MM-DD``, which is its midnight UTC; or a date-time with its
    offset (``Z``, ``+00:00``, ``+01:00``) as `Timestamp.parse` reads the
    journal's times: nanoseconds kept, a space for the ``T``, and a ``t``. A time of day
    with no offset is refused, not read as UTC: typed by an operator in New
    York it would be five hours off, and keep or erase what was not meant.

    Args:
        value: the time given.
        what: the option it was given to (``before=``), which every message
            begins with; None: the message names none (argparse names it).

    Raises:
        ConfigurationError: none of these.
    """

    # errors.py names the records (models.py), which hold Timestamps: imported here, no cycle.
    from sessionstore.errors import ConfigurationError

    def refused(detail: str) -> ConfigurationError:
        return ConfigurationError(detail if what is None else f"{what} {detail}")

    if isinstance(value, Timestamp):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise refused(f"needs an aware datetime (with an offset), not {value}")
        return Timestamp.from_datetime(value)
    if not isinstance(value, str):
        raise refused(f"takes a datetime or an RFC 3339 string, not {value!r}")
    alone = _DATE_ALONE.fullmatch(value) is not None
    # RFC 3339 (5.6) lets the T be a t; the journal's parser, as chrono 0.4.23, does not.
    text = f"{value.strip()}T00:00:00Z" if alone else _LOWERCASE_T.sub("T", value, count=1)
    try:
        return Timestamp.parse(text)
    except _OutOfRange:
        raise refused(f"is out of range: {value!r}") from None
    except ValueError:
        pass
    try:
        Timestamp.parse(text + "Z")
    except ValueError:
        raise refused(f"is not an RFC 3339 time: {value!r} (give {_FORMS})") from None
    raise refused(f"has no time zone: {value!r} (give {_FORMS})")
