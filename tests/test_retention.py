"""Retention policies as values (`sessionstore.retention.Policy`): what each
refuses, naming the field, and the words a policy records. What a policy
does to a store is in the contract suite (sessionstore/testing/retention.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from sessionstore import ConfigurationError, Message, MessageEntry, SessionMeta, open_store
from sessionstore.retention import Policy, apply, plan


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({}, "a policy needs a filter"),
        ({"owner": None, "tags": ()}, "it never takes everything"),
        ({"action": "delete", "owner": "a"}, "action= is 'expire' or 'retire', not 'delete'"),
        ({"action": "retire", "owner": "a"}, "retire needs to=, the archive"),
        ({"to": "archive", "owner": "a"}, "only retire takes to="),
        ({"tags": "scratch"}, "tags= takes a list of tags, not the string 'scratch'"),
        ({"tags": ["ok", ""]}, "tags= takes non-empty strings"),
        ({"owner": 7}, "owner= takes a non-empty string, not 7"),
        ({"owner": ""}, "owner= takes a non-empty string, not ''"),
        ({"keep_newest": 0}, "keep_newest= takes a whole number of 1 or more, not 0"),
        ({"keep_newest": True}, "keep_newest= takes a whole number of 1 or more, not True"),
        ({"idle_for": timedelta(days=-1)}, "idle_for= takes a timedelta of 0 or more"),
        ({"idle_for": 90}, "idle_for= takes a timedelta of 0 or more, not 90"),
        ({"idle_for": timedelta(days=999_999)}, "idle_for= reaches back before the year 1"),
        ({"created_before": "yesterday"}, "created_before= is not an RFC 3339 time"),
        ({"created_before": datetime(2026, 1, 1)}, "created_before= needs an aware datetime"),
        ({"owner": "a", "reason": "  "}, "reason= must say why"),
        (
            {"action": "retire", "to": "a", "owner": "a", "reason": "why"},
            "reason= is for expire: retire records its archive",
        ),
    ],
)
def test_a_policy_refuses_what_it_cannot_mean_naming_the_field(
    fields: dict[str, object], words: str
) -> None:
    with pytest.raises(ConfigurationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Policy(**fields)  # type: ignore[arg-type]


def test_a_policy_describes_its_filters_and_records_them_by_default() -> None:
    policy = Policy(
        idle_for=timedelta(days=90),
        created_before="2026-01-01T00:00:00+01:00",
        owner="alice",
        tags=["scratch", "ci"],
        keep_newest=20,
    )
    assert policy.tags == ("scratch", "ci")
    assert policy.describe() == (
        "idle 90d, created before 2025-12-31T23:00:00Z, owner alice, tag scratch, tag ci, "
        "keeping the newest 20 per owner"
    )
    assert policy.erasure_reason() == f"expired by policy: {policy.describe()}"
    assert Policy(owner="a", reason="ticket 7").erasure_reason() == "ticket 7"
    assert Policy(idle_for=timedelta(hours=36)).describe() == "idle 1d 12h"
    assert Policy(idle_for=timedelta(hours=5)).describe() == "idle 5h"


async def test_a_policy_on_an_empty_store_plans_and_does_nothing(tmp_path: Path) -> None:
    async with await open_store(str(tmp_path / "sessions")) as store:
        policy = Policy(idle_for=timedelta(0))
        planned = await plan(store, policy)
        assert (planned.going, planned.left, planned.held) == ([], [], 0)
        report = await apply(store, policy)
        assert (report.gone, report.already_gone, report.ok) == ([], [], True)


async def test_a_session_last_active_before_the_year_1_in_utc_is_planned_with_its_reason() -> None:
    # Entry times are strings as written: 0001-01-01T00:00:00+14:00 is in
    # the year 0 in UTC, which no datetime holds; the reason's idle age
    # was taken through one and the plan raised ValueError.
    async with await open_store("memory://") as store:
        await store.create(SessionMeta(id="old", created_at="0001-01-01T00:00:00+14:00"))
        entry = MessageEntry.new(Message.user("hi"))
        year_0 = entry.model_copy(update={"timestamp": "0001-01-01T00:00:00+14:00"})
        await store.append("old", year_0)
        planned = await plan(store, Policy(idle_for=timedelta(days=1)))
        assert [(going.session_id, going.reason) for going in planned.going] == [
            ("old", "idle since 0000-12-31T10:00:00Z")
        ]
