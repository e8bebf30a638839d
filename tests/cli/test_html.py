"""The command line's pages: ``html`` and ``export --html``; and a page in a
real browser (headless Chromium, from Debian's packages)."""

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sessionstore import Message, MessageEntry, SessionMeta, open_store
from sessionstore.testing.contract import message
from tests.cli.helpers import run
from tests.page import parse

# What a page must show as text; a browser that ran it would mark <body>.
ATTACKS = [
    "<script>document.body.setAttribute('data-pwned','script')</script>",
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">",
    "</details></article><svg onload=\"document.body.setAttribute('data-pwned','svg')\">",
]


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A SQLite store holding ``chat`` (e0..e2, then the attacks) and its fork ``branch``."""
    target = f"sqlite:///{tmp_path / 'sessions.db'}"

    async def fill() -> None:
        async with await open_store(target) as store:
            await store.create(SessionMeta(id="chat", created_at="2026-01-01T00:00:00Z"))
            await store.append_many("chat", [message(f"e{n}", f"text {n}") for n in range(3)])
            await store.append_many(
                "chat",
                [
                    MessageEntry(id=f"x{n}", timestamp="t", message=Message.user(text))
                    for n, text in enumerate(ATTACKS)
                ],
            )
            await store.fork("chat", at="e1", meta=SessionMeta(id="branch"))

    asyncio.run(fill())
    return target


def test_html_writes_the_page_to_stdout(capsys: pytest.CaptureFixture[str], db: str) -> None:
    status, out, err = run(capsys, "--db", db, "html", "chat")
    assert (status, err) == (0, "")
    page = parse(out)
    assert len(page.find_all("article")) == 3 + len(ATTACKS)
    assert [t.text() for t in page.find_all(cls="text")][3:] == ATTACKS
    assert not page.find_all("script")


def test_html_out_writes_a_file(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    target = tmp_path / "branch.html"
    status, out, err = run(capsys, "--db", db, "html", "branch", "--out", str(target))
    assert (status, err) == (0, "")
    assert out == f"wrote the page of session branch to {target}\n"
    page = parse(target.read_text(encoding="utf-8"))
    assert page.find("a").attrs["href"] == "chat.html"


def test_html_of_a_missing_session_is_one_line_and_leaves_no_file(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    target = tmp_path / "nobody.html"
    status, out, err = run(capsys, "--db", db, "html", "nobody", "--out", str(target))
    assert (status, out) == (1, "")
    assert err.startswith("sessionstore: error: session not found: 'nobody'")
    assert len(err.splitlines()) == 1
    assert not target.exists()


def test_export_html_writes_a_page_per_session_and_import_ignores_them(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    status, _, err = run(capsys, "--db", db, "export", str(archive), "--html")
    assert (status, err) == (0, "")
    assert sorted(p.name for p in (archive / "html").iterdir()) == ["branch.html", "chat.html"]
    assert sorted(p.name for p in (archive / "sessions").iterdir()) == [
        "branch.jsonl",
        "chat.jsonl",
    ]
    # The archive with its pages is still an archive: extended, and imported whole.
    status, out, err = run(capsys, "--db", db, "export", str(archive), "--html")
    assert (status, err) == (0, "")
    assert out.startswith("nothing new to export: 2 sessions, 0 journals, 0 heads already in ")
    copy = str(tmp_path / "copy")
    status, out, err = run(capsys, "--db", copy, "import", str(archive))
    assert (status, err) == (0, "")
    assert out.startswith("imported 2 sessions (8 new entries)")
    status, page, _ = run(capsys, "--db", copy, "html", "chat")
    assert status == 0
    assert page == (archive / "html" / "chat.html").read_text(encoding="utf-8")


def test_export_html_of_one_session_writes_only_its_page(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    status, _, err = run(
        capsys, "--db", db, "export", str(archive), "--session", "branch", "--html"
    )
    assert (status, err) == (0, "")
    assert [p.name for p in (archive / "html").iterdir()] == ["branch.html"]


# ---------------------------------------------------------------- a real browser


def chromium_or_skip() -> str:
    """Debian's Chromium; skip (locally) or fail (in CI) without it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but chromium is not installed: .ci/run must install it")
    pytest.skip("the browser test needs chromium (apt-get install chromium)")


def test_a_browser_shows_the_text_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    browser = chromium_or_skip()
    target = tmp_path / "chat.html"
    assert run(capsys, "--db", db, "html", "chat", "--out", str(target))[0] == 0
    dumped = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            target.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    dom = parse(dumped)
    body = dom.find("body")
    assert "data-pwned" not in body.attrs  # no script ran, no handler fired
    assert not {e.tag for e in dom.walk()} & {"script", "img", "svg"}
    assert [t.text() for t in dom.find_all(cls="text")] == [
        "text 0",
        "text 1",
        "text 2",
        *ATTACKS,
    ]
