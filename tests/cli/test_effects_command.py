"""``sessionstore effects``: what an operator must look at across every journal
(in doubt, dead-lettered), a dead-lettered effect settled by hand, and the
recorded prune of old finished effects (docs/cli.md, docs/effects.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import pytest

from sessionstore import EffectDeadLetterError, open_store
from sessionstore.testing.effects_contract import Crash, crash
from sessionstore.wire import decode_effect
from tests.cli.helpers import on_terminal, run


async def _store(db: str) -> None:
    """``mailer``: one done, one in doubt; ``billing``: one dead-lettered."""
    async with open_store(db) as store:
        mailer, billing = store.journal("mailer").effects, store.journal("billing").effects
        await mailer.once(lambda: "m-1", tool="send_email", session="chat-1", key="m1")
        with contextlib.suppress(Crash):
            await mailer.once(crash, tool="send_email", session="chat-1", key="m2")
        for _ in range(2):
            with contextlib.suppress(Crash):
                await billing.once(
                    crash, tool="charge", session="chat-2", key="b1", idempotent=True, dead_letter=1
                )
        with pytest.raises(EffectDeadLetterError):
            await billing.once(crash, tool="charge", key="b1", idempotent=True, dead_letter=1)


async def _once(db: str, journal: str, key: str, tool: str) -> object:
    async with open_store(db) as store:
        return await store.journal(journal).effects.once(lambda: "ran", tool=tool, key=key)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_the_listing_shows_every_journal_effect_left_unfinished(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    db = str(tmp_path / ("s.db" if kind == "sqlite" else "store"))
    asyncio.run(_store(db))
    status, out, err = run(capsys, "--db", db, "effects")
    header, *rows, summary = out.splitlines()
    assert status == 1
    assert header.split("\t") == [
        "journal", "key", "state", "tool", "session", "age", "attempts", "found", "started"
    ]  # fmt: skip
    assert [row.split("\t")[:5] + row.split("\t")[6:8] for row in rows] == [
        ["billing", "b1", "dead letter", "charge", "chat-2", "2", "2"],
        ["mailer", "m2", "in doubt", "send_email", "chat-1", "1", "0"],
    ]
    assert summary == "1 effect in doubt, 1 dead-lettered, in 2 journals"
    assert "--settle KEY" in err
    status, out, _ = run(capsys, "--db", db, "effects", "--json")
    found = [json.loads(line) for line in out.splitlines()]
    assert status == 1
    assert [(f["journal"], f["key"], f["state"], f["attempts"]) for f in found] == [
        ("billing", "b1", "dead letter", 2),
        ("mailer", "m2", "in doubt", 1),
    ]
    assert all(isinstance(f["age_seconds"], int) and f["age_seconds"] >= 0 for f in found)


def test_a_dead_lettered_effect_is_settled_by_hand_and_then_listed_no_more(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_store(db))
    status, out, _ = run(
        capsys, "--db", db, "journal", "billing", "--settle", "b1", "not-done",
        "--reason", "no charge in the provider's log", "--by", "ada",
    )  # fmt: skip
    assert (status, out.splitlines()[-1]) == (0, "its next run runs it")
    assert asyncio.run(_once(db, "billing", "b1", "charge")) == "ran"
    status, out, _ = run(capsys, "--db", db, "effects", "--json")
    assert (status, [json.loads(line)["key"] for line in out.splitlines()]) == (1, ["m2"])


def test_forgetting_lists_first_then_forgets_recorded_and_the_key_runs_afresh(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_store(db))
    forget = ("--db", db, "effects", "--forget-before", "2999-01-01")
    status, out, err = run(capsys, *forget)
    assert status == 0
    assert out.splitlines()[1].split("\t")[:3] == ["mailer", "m1", "done"]
    assert out.splitlines()[-1] == "1 effect would be forgotten; add --yes --reason TEXT to do it"
    assert "a replay of one of these would run it again" in err
    assert asyncio.run(_once(db, "mailer", "m1", "send_email")) == "m-1"  # nothing forgotten yet
    status, _, err = run(capsys, *forget, "--yes")
    assert (status, "needs --reason" in err) == (1, True)
    status, out, _ = run(capsys, *forget, "--yes", "--reason", "older than 30 days", "--by", "ops")
    assert (status, out.splitlines()[-1]) == (
        0,
        "forgot 1 effect by ops; reason: older than 30 days",
    )

    async def lines() -> list[bytes]:
        async with open_store(db) as store:
            return (await store.journal("mailer").effects.lines.read_bytes()).splitlines()

    last = decode_effect(asyncio.run(lines())[-1])
    assert (last.effect, last.key, last.reason, last.by) == (
        "forgotten", "m1", "older than 30 days", "ops"
    )  # fmt: skip
    assert asyncio.run(_once(db, "mailer", "m1", "send_email")) == "ran"  # runs afresh
    status, out, _ = run(capsys, *forget, "--yes", "--reason", "again")
    assert out.splitlines()[-1] == "forgot 1 effect by " + out.splitlines()[-1].split(" by ")[1]


def test_a_date_that_is_none_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_store(db))
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", db, "effects", "--forget-before", "last tuesday")
    err = capsys.readouterr().err
    assert exited.value.code == 2  # a usage error, as a bad --idle
    assert "argument --forget-before" in err
    assert "RFC 3339" in err
    status, _, err = run(capsys, "--db", db, "effects", "--reason", "x")
    assert (status, "go with --forget-before" in err) == (1, True)


def test_a_time_of_day_without_an_offset_is_refused_not_read_as_utc(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 09:00 typed by an operator in New York is 14:00 UTC: read as UTC, a
    # prune would keep or forget effects five hours off from what was meant.
    db = str(tmp_path / "s.db")
    asyncio.run(_store(db))
    forget = ("--db", db, "effects", "--forget-before")
    with pytest.raises(SystemExit) as exited:
        run(capsys, *forget, "2999-01-01T09:00:00", "--reason", "x", "--yes")
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert "has no time zone" in err
    assert out == ""
    assert asyncio.run(_once(db, "mailer", "m1", "send_email")) == "m-1"  # nothing forgotten
    status, out, _ = run(capsys, *forget, "2999-01-01T09:00:00+01:00")
    assert (status, out.splitlines()[-1]) == (
        0,
        "1 effect would be forgotten; add --yes --reason TEXT to do it",
    )


def test_on_a_terminal_a_cell_s_name_and_value_share_a_line(tmp_path: Path) -> None:
    # 80 columns broke "finished 2026-12-07 00:47:58" after "finished", and the
    # hint named no store, so the settle it gave opened ./sessions.db.
    db = str(tmp_path / "s.db")
    asyncio.run(_store(db))
    done = on_terminal("--db", db, "effects", "--forget-before", "2999-01-01")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  journal mailer  state done  tool send_email  session chat-1" in lines
    assert re.fullmatch(r"  finished \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", lines[3])
    assert max(len(line) for line in lines) <= 80
    done = on_terminal("--db", db, "effects")
    assert done.returncode == 1
    assert f"sessionstore --db {db} journal NAME --settle KEY" in " ".join(done.stderr.split())


def test_forgetting_goes_over_every_journal_a_key_name_in_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_store(db))
    assert asyncio.run(_once(db, "quiet", "m1", "count")) == "ran"  # m1 in two journals
    forget = ("--db", db, "effects", "--forget-before", "2999-01-01", "--yes", "--reason", "old")
    status, out, _ = run(capsys, *forget, "--by", "ops")
    assert status == 0
    assert [row.split("\t")[:2] for row in out.splitlines()[1:-1]] == [
        ["mailer", "m1"],
        ["quiet", "m1"],
    ]
    assert out.splitlines()[-1] == "forgot 2 effects by ops; reason: old"
    assert asyncio.run(_once(db, "quiet", "m1", "count")) == "ran"  # forgotten: runs afresh
