"""``sessionstore journal``: a journal's effects, and ``--in-doubt`` for
operators (docs/effects.md, docs/cli.md)."""

import asyncio
import contextlib
from pathlib import Path

import pytest

from sessionstore import open_store
from sessionstore.testing.effects_contract import Crash
from tests.cli.helpers import run


async def _effects(db: str) -> None:
    async with open_store(db) as store:
        mailer = store.journal("mailer").effects
        await mailer.once(lambda: "m-1", tool="send_email", session="chat-1", call_id="c1")
        with contextlib.suppress(Crash):
            await mailer.once(_crash, tool="send_email", session="chat-1", call_id="c2")
        billing = store.journal("billing").effects
        with contextlib.suppress(ValueError):
            await billing.once(_refused, tool="charge", key="order-7")


def _crash() -> None:
    raise Crash


def _refused() -> None:
    raise ValueError("card declined")


def test_journal_shows_each_effect_and_in_doubt_lists_them_for_operators(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_effects(db))
    status, out, err = run(capsys, "--db", db, "journal", "mailer")
    assert (status, err) == (0, "")
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows[-3][:4] == ["chat-1:c1", "done", "send_email", "chat-1"]
    assert rows[-2][:4] == ["chat-1:c2", "in doubt", "send_email", "chat-1"]
    assert out.splitlines()[-1] == "effects: 1 done, 0 failed, 1 in doubt"
    status, out, _ = run(capsys, "--db", db, "journal", "billing")
    assert "card declined" in out
    assert out.splitlines()[-1] == "effects: 0 done, 1 failed, 0 in doubt"

    status, out, err = run(capsys, "--db", db, "journal", "--in-doubt")
    assert status == 1  # an operator's script sees there is one
    lines = out.splitlines()
    assert lines[0].split("\t")[:3] == ["journal", "key", "tool"]
    assert lines[1].split("\t")[:3] == ["mailer", "chat-1:c2", "send_email"]
    assert lines[-1] == "1 effect in doubt in 2 journals"
    status, out, _ = run(capsys, "--db", db, "journal", "billing", "--in-doubt")
    assert (status, out.splitlines()[-1]) == (0, "0 effects in doubt in journal billing")
    status, out, err = run(capsys, "--db", db, "journal")  # no name: every journal, listed
    assert (status, err) == (0, "")
    assert [line.split("\t") for line in out.splitlines()] == [
        ["journal", "sessions", "effects", "in doubt"],
        ["billing", "0", "1", "0"],
        ["mailer", "0", "2", "1"],
    ]


@pytest.mark.parametrize("in_doubt", [[], ["--in-doubt"]])
def test_a_journal_that_holds_nothing_is_refused_naming_those_there_are(
    capsys: pytest.CaptureFixture[str], target: str, in_doubt: list[str]
) -> None:
    run(capsys, "--db", target, "demo")
    status, out, err = run(capsys, "--db", target, "journal", "demo-agnet", *in_doubt)
    assert status == 1
    assert out == ""
    assert "journal not found: 'demo-agnet' (journals here: 'demo-agent')" in err
