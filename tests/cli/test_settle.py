"""``sessionstore journal NAME --settle KEY OUTCOME``: an operator settles an
effect in doubt, recorded (docs/cli.md, docs/effects.md)."""

import asyncio
import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from sessionstore import EffectFailedError, EffectInDoubtError, FileJournal, open_store
from sessionstore.testing.effects_contract import Crash, crash
from tests.cli.helpers import run
from tests.kinds import TEST_KEYS, StoreTargets


async def _in_doubt(db: str, *calls: str) -> None:
    """A ``mailer`` journal with one effect done and one in doubt per call."""
    async with open_store(db) as store:
        mailer = store.journal("mailer").effects
        await mailer.once(lambda: "m-1", tool="send_email", session="chat-1", call_id="c1")
        for call in calls:
            with contextlib.suppress(Crash):
                await mailer.once(crash, tool="send_email", session="chat-1", call_id=call)


async def _once(db: str, call: str, effect: Callable[[], object]) -> object:
    async with open_store(db) as store:
        mailer = store.journal("mailer").effects
        return await mailer.once(effect, tool="send_email", session="chat-1", call_id=call)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_each_outcome_is_settled_recorded_and_taken_by_the_next_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    db = str(tmp_path / ("s.db" if kind == "sqlite" else "store"))
    asyncio.run(_in_doubt(db, "c2", "c3", "c4"))
    settle = ("--db", db, "journal", "mailer", "--settle")

    status, out, err = run(
        capsys, *settle, "chat-1:c2", "done", "--result", '{"id": "m-2"}',
        "--reason", "in the sent folder", "--by", "ada",
    )  # fmt: skip
    assert (status, err) == (0, "")
    first, reason, next_run = out.splitlines()
    assert first.startswith(
        "settled effect 'chat-1:c2' (send_email) in journal mailer: done by ada at "
    )
    assert (reason, next_run) == (
        "  reason: in the sent folder",
        "its next run returns that result without running it",
    )
    status, out, _ = run(capsys, *settle, "chat-1:c3", "not-done", "--reason", "not sent")
    assert (status, out.splitlines()[-1]) == (0, "its next run runs it")
    status, out, _ = run(capsys, *settle, "chat-1:c4", "failed", "--reason", "bounced")
    assert (status, out.splitlines()[-1]) == (
        0,
        "its next run fails with that reason without running it",
    )

    status, out, _ = run(capsys, "--db", db, "journal", "mailer")
    rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
    assert rows["chat-1:c2"][1::6] == ["done", "ada: in the sent folder"]
    assert rows["chat-1:c3"][1] == "not done"
    assert rows["chat-1:c4"][1] == "failed"
    assert rows["chat-1:c4"][6] == "bounced"
    assert out.splitlines()[-1] == "effects: 2 done, 1 failed, 0 in doubt, 1 not done"
    status, out, _ = run(capsys, "--db", db, "journal", "--in-doubt")
    assert (status, out.splitlines()[-1]) == (0, "0 effects in doubt in 1 journal")

    # The next runs take what was settled.
    assert asyncio.run(_once(db, "c2", lambda: "sent again")) == {"id": "m-2"}
    assert asyncio.run(_once(db, "c3", lambda: "sent now")) == "sent now"
    with pytest.raises(EffectFailedError, match=r"settled failed by .+: bounced"):
        asyncio.run(_once(db, "c4", lambda: "sent again"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mailr", "--settle", "chat-1:c2", "not-done", "--reason", "r"],
         "journal not found: 'mailr' (journals here: 'mailer')"),
        (["mailer", "--settle", "chat-1:c9", "not-done", "--reason", "r"],
         "no effect 'chat-1:c9' in journal 'mailer': nothing to settle"),
        (["mailer", "--settle", "chat-1:c1", "not-done", "--reason", "r"],
         "effect 'chat-1:c1' in journal 'mailer' is not in doubt: done at "),
        (["mailer", "--settle", "chat-1:c2", "maybe", "--reason", "r"],
         "--settle chat-1:c2 maybe: the outcome is done, not-done or failed"),
        (["mailer", "--settle", "chat-1:c2", "not-done"],
         "--settle chat-1:c2 not-done needs --reason TEXT: what you found, and where"),
        (["mailer", "--settle", "chat-1:c2", "done", "--reason", "r"],
         "--settle chat-1:c2 done needs --result JSON: what the effect returned"),
        (["mailer", "--settle", "chat-1:c2", "failed", "--result", "1", "--reason", "r"],
         "--settle chat-1:c2 failed takes no --result: only a done effect has one"),
        (["mailer", "--settle", "chat-1:c2", "done", "--result", "sent", "--reason", "r"],
         "--result is not JSON (invalid JSON at line 1, column 1"),
        (["--settle", "chat-1:c2", "done", "--result", "1", "--reason", "r"],
         "journal --settle needs the journal's NAME"),
    ],
)  # fmt: skip
def test_what_cannot_be_settled_is_one_line_and_status_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_in_doubt(db, "c2"))
    status, out, err = run(capsys, "--db", db, "journal", *args)
    assert (status, out) == (1, "")
    assert err.startswith(f"sessionstore: error: {message}")
    assert len(err.splitlines()) == 1
    status, out, _ = run(capsys, "--db", db, "journal", "mailer", "--in-doubt")
    assert status == 1  # still in doubt: nothing was written


def test_a_settle_twice_is_refused_the_second_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_in_doubt(db, "c2"))
    settle = ("--db", db, "journal", "mailer", "--settle", "chat-1:c2", "not-done")
    assert run(capsys, *settle, "--reason", "not sent")[0] == 0
    status, _, err = run(capsys, *settle, "--reason", "not sent")
    assert status == 1
    assert "is not in doubt: not done at " in err


async def _left_in_doubt(target: str, **options: object) -> EffectInDoubtError:
    """What the second run of an effect a crash cut short raises."""
    async with open_store(target, **options) as store:
        mailer = store.journal("mailer").effects
        with contextlib.suppress(Crash):
            await mailer.once(crash, tool="send_email", key="order-7 mail")
        try:
            await mailer.once(crash, tool="send_email", key="order-7 mail")
        except EffectInDoubtError as exc:
            return exc
    raise AssertionError("not in doubt")


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgresql", "sqlite-sealed"])
def test_the_commands_an_effect_in_doubt_names_settle_it_as_printed(
    capsys: pytest.CaptureFixture[str], store_targets: StoreTargets, tmp_path: Path, kind: str
) -> None:
    target = store_targets.new(kind)
    options = {"keys": TEST_KEYS} if kind.endswith("-sealed") else {}  # its keyring beside it
    error = asyncio.run(_left_in_doubt(target, **options))
    assert error.journal == "mailer"
    (line,) = [line for line in str(error).splitlines() if " not-done " in line]
    keys = tmp_path / "store.key"
    keys.write_text(TEST_KEYS[0] + "\n")
    fill = {"WHY": "not in the outbox", "KEYS": str(keys)}
    words = [fill.get(word, word) for word in shlex.split(line)]
    assert words[:2] == ["sessionstore", "--db"]
    assert ("--key-file" in words) == kind.endswith("-sealed")
    assert run(capsys, *words[1:])[0] == 0

    async def again() -> object:
        async with open_store(target, **options) as store:
            mailer = store.journal("mailer").effects
            return await mailer.once(lambda: "sent", tool="send_email", key="order-7 mail")

    assert asyncio.run(again()) == "sent"  # settled not done: it ran


def test_a_memory_store_s_effect_in_doubt_names_the_call_that_settles_it() -> None:
    error = asyncio.run(_left_in_doubt("memory://"))
    assert "sessionstore" not in str(error).split("in doubt")[-1]  # no command can reach it
    assert "await journal.effects.settle('order-7 mail', 'not-done', reason=...)" in str(error)


def test_a_file_journal_of_its_own_names_the_call_that_settles_it(tmp_path: Path) -> None:
    async def left() -> EffectInDoubtError:
        effects = FileJournal.in_dir(tmp_path / "agent").effects
        with contextlib.suppress(Crash):
            await effects.once(crash, tool="send_email", key="k")
        with pytest.raises(EffectInDoubtError) as raised:
            await effects.once(crash, tool="send_email", key="k")
        return raised.value

    error = asyncio.run(left())
    assert error.journal is None  # in no store: no command opens it
    assert "await journal.effects.settle('k', 'failed', reason=...)" in str(error)


def test_in_doubt_says_how_to_settle_what_it_lists(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asyncio.run(_in_doubt(db, "c2"))
    status, out, err = run(capsys, "--db", db, "journal", "--in-doubt")
    assert (status, out.splitlines()[-1]) == (1, "1 effect in doubt in 1 journal")
    assert f"sessionstore --db {db} journal NAME --settle KEY done --result JSON" in err
