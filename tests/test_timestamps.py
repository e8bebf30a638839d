"""`sessionstore.timestamps.given_instant`: the one rule of a time a user
gives, through every option that takes one: ``retire(before=)``, a policy's
``created_before=``, `EffectLog.forget` and `forget_effects`, and the command
line's ``--before`` / ``--created-before`` and ``--forget-before``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sessionstore import forget_effects, open_store
from sessionstore.archive.choosing import instant as retire_before
from sessionstore.cli.parser import build_parser
from sessionstore.errors import ConfigurationError
from sessionstore.retention import Policy
from sessionstore.timestamps import Timestamp, age_in_words, given_instant

ACCEPTED = [
    ("2026-12-01", "2026-12-01T00:00:00Z"),  # a date alone: its midnight UTC
    ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"),
    ("2026-12-01T09:00:00z", "2026-12-01T09:00:00Z"),
    ("2026-12-01t09:00:00z", "2026-12-01T09:00:00Z"),  # RFC 3339 5.6: a lowercase t too
    ("2026-12-01t10:00:00+01:00", "2026-12-01T09:00:00Z"),
    ("2026-12-01T09:00:00+00:00", "2026-12-01T09:00:00Z"),
    ("2026-12-01T10:30:00+01:30", "2026-12-01T09:00:00Z"),
    ("2026-12-01 09:00:00Z", "2026-12-01T09:00:00Z"),
    ("2026-12-01T09:00:00.123456789Z", "2026-12-01T09:00:00.123456789Z"),  # nanoseconds kept
    ("2016-12-31T23:59:60Z", "2016-12-31T23:59:60Z"),  # a leap second
]

REFUSED = [
    ("2026-12-01T09:00:00", "has no time zone"),  # not read as UTC: hours off
    ("2026-12-01 09:00:00.5", "has no time zone"),
    ("2026-12-01T09:00Z", "is not an RFC 3339 time"),  # seconds are not optional
    ("2026-12-01t09:00:00", "has no time zone"),
    ("2026-12-01x09:00:00Z", "is not an RFC 3339 time"),
    ("20261201", "is not an RFC 3339 time"),
    ("2026-W49-1", "is not an RFC 3339 time"),
    ("last tuesday", "is not an RFC 3339 time"),
    ("orange", "is not an RFC 3339 time"),  # a word with "range" in it is no range error
    ("2026-12-01T09:00:00 arrange", "is not an RFC 3339 time"),
    ("", "is not an RFC 3339 time"),
    ("2026-02-30", "is out of range"),
    ("2026-12-01T24:00:00Z", "is out of range"),
]


async def _forget(value: str) -> None:
    async with await open_store("memory://") as store:
        await store.journal("j").effects.forget(value, reason="old")
        await forget_effects(store, value, reason="old")


def _policy(value: str) -> Timestamp:
    cutoff = Policy(created_before=value).cutoff()
    assert cutoff is not None
    return cutoff


LIBRARY: dict[str, Callable[[str], object]] = {
    "given_instant": lambda value: given_instant(value, "at="),
    "retire before=": retire_before,
    "Policy created_before=": _policy,
    "EffectLog.forget": lambda value: asyncio.run(_forget(value)),
}

COMMANDS = {
    "retire --before": ["retire", "--to", "archive", "--before"],
    "expire --created-before": ["expire", "--created-before"],
    "effects --forget-before": ["effects", "--forget-before"],
}


@pytest.mark.parametrize(("text", "utc"), ACCEPTED)
@pytest.mark.parametrize("where", LIBRARY)
def test_every_library_option_takes_the_same_times(where: str, text: str, utc: str) -> None:
    got = LIBRARY[where](text)
    if isinstance(got, Timestamp):
        assert str(got) == utc


@pytest.mark.parametrize(("text", "why"), REFUSED)
@pytest.mark.parametrize("where", LIBRARY)
def test_every_library_option_refuses_the_same_times(where: str, text: str, why: str) -> None:
    with pytest.raises(ConfigurationError, match=why) as refused:
        LIBRARY[where](text)
    assert repr(text) in str(refused.value)


@pytest.mark.parametrize(("text", "utc"), ACCEPTED)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_date_option_of_the_command_line_takes_the_same_times(
    command: str, text: str, utc: str
) -> None:
    args = build_parser().parse_args([*COMMANDS[command], text])
    cutoff = args.forget_before if command.startswith("effects") else args.before
    assert str(cutoff) == utc


@pytest.mark.parametrize(("text", "why"), REFUSED)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_date_is_a_usage_error_as_a_bad_age_is(
    command: str, text: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*COMMANDS[command], text])
    err = capsys.readouterr().err
    assert exited.value.code == 2  # docs/cli.md: wrong arguments exit 2, as --idle soon does
    flag = COMMANDS[command][-1]
    assert f"argument {flag}" in err
    assert why in err


def test_datetimes_and_timestamps_are_taken_a_naive_one_refused() -> None:
    aware = datetime(2026, 12, 1, 10, tzinfo=timezone(timedelta(hours=1)))
    assert str(given_instant(aware)) == "2026-12-01T09:00:00Z"
    stamp = Timestamp.parse("2026-12-01T09:00:00.000000001Z")
    assert given_instant(stamp) is stamp
    with pytest.raises(ConfigurationError, match=r"^before= needs an aware datetime"):
        given_instant(datetime(2026, 12, 1), "before=")
    with pytest.raises(ConfigurationError, match="takes a datetime or an RFC 3339 string, not 5"):
        given_instant(5)
    assert given_instant(datetime(2026, 12, 1, tzinfo=UTC)) == given_instant("2026-12-01")


@pytest.mark.parametrize(
    ("age", "words"),
    [
        (timedelta(days=90), "90d"),
        (timedelta(days=1, hours=12, minutes=30), "1d 12h"),
        (timedelta(hours=5), "5h"),
        (timedelta(hours=2, minutes=5, seconds=9), "2h 5m"),
        (timedelta(minutes=3, seconds=40), "3m 40s"),
        (timedelta(seconds=40.9), "40s"),
        (timedelta(0), "0s"),
        (timedelta(seconds=-5), "0s"),  # a clock set back: no age below zero
    ],
)
def test_an_age_in_words_gives_its_two_largest_units(age: timedelta, words: str) -> None:
    assert age_in_words(age) == words
