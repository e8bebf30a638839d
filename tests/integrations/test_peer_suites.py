"""The frameworks' own session tests, run on our adapters.

openai-agents' session tests run on `StoreSession`, langchain-core's chat
history tests on `SessionStoreChatMessageHistory`, each on three kinds of
store. The peers' test files come from their sdists on PyPI, at the
installed versions (``tests/peers/fetch.py``; `.ci/run` names where in
``SESSIONSTORE_PEER_TESTS``): without them these tests are skipped, and
fail under ``CI=true``. Each run is a pytest subprocess in the peer's own
directory, with its own settings and ``-p sessionstore_peer_plugin``
(``tests/peers/``), which puts our adapter in place of the peer's classes
and lists every file left out, test skipped and failure known.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import require
from tests.peers import fetch
from tests.peers import sessionstore_peer_plugin as plugin

PEER_TESTS_ENV = "SESSIONSTORE_PEER_TESTS"
PLUGIN_DIR = Path(plugin.__file__).parent

MODULES = {
    "openai-agents": ("agents", "openai-agents"),
    "langchain-core": ("langchain_core", "langchain"),
}
"""Each peer's module, and the extra of ours that installs it."""

EXPECTED_TESTS = {
    "openai-agents==0.24.0": 446,
    "langchain-core==1.8.3": 29,
}
"""How many tests the peer's files hold at each version we have looked at.
A new version may add or rename tests: read its skips and failures, then
add its count here."""

OPTIONS: dict[str, tuple[str, ...]] = {
    "openai-agents": (),
    # langchain-core's conftest wants blockbuster and pytest-mock, which our
    # dev extra does not bring; the files run here use none of its fixtures.
    "langchain-core": ("--noconftest",),
}

RUN_TIMEOUT = 1800


def peer_tests_or_skip(peer: str) -> Path:
    """The extracted tests of the installed ``peer``; skip (locally) or fail (CI) without."""
    module, extra = MODULES[peer]
    require(module, extra)
    root = os.environ.get(PEER_TESTS_ENV)
    where = fetch.peer_dir(Path(root), peer) if root else None
    if where is not None and (where / fetch.DONE).is_file():
        return where
    version = importlib.metadata.version(peer)
    why = (
        f"{peer} {version}'s own tests are not extracted"
        + (f" in {root}" if root else f": {PEER_TESTS_ENV} is not set")
        + f"; export {PEER_TESTS_ENV}=$(.venv/bin/python tests/peers/fetch.py)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {why} (.ci/run must fetch them)", pytrace=False)
    pytest.skip(why)


def test_every_session_test_file_runs_or_is_left_out_by_name() -> None:
    """Nothing of a peer's session tests goes unnoticed, nothing listed is stale."""
    for peer in plugin.PEERS:
        where = peer_tests_or_skip(peer)
        present = {
            str(path.relative_to(where))
            for directory in plugin.SESSION_DIRS[peer]
            for path in (where / directory).glob("test_*.py")
        }
        listed = set(plugin.FILES[peer]) | plugin.LEFT_OUT[peer].keys()
        assert present - listed == set(), f"{peer}: files neither run nor left out"
        missing = {file for file in listed if not (where / file).is_file()}
        assert missing == set(), f"{peer}: files listed that the sdist does not hold"


def test_the_docs_name_every_file_left_out_and_every_test_skipped() -> None:
    """docs/integrations.md, "The frameworks' own tests", follows the plugin's lists."""
    docs = (Path(__file__).parents[2] / "docs" / "integrations.md").read_text()
    section = docs[docs.index("## The frameworks' own tests") :]
    for peer in plugin.PEERS:
        for name in plugin.SKIPPED[peer]:
            assert f"`{name.rsplit('::', 1)[1]}`" in section, name
        for file in plugin.FILES[peer]:  # by its path, or its name after its folder's
            assert f"`{file}`" in section or f"`{file.rsplit('/', 1)[1]}`" in section, file
        for file in plugin.LEFT_OUT[peer]:
            assert f"`{file}`" in section, file


def run_peer_suite(peer: str, kind: str, where: Path, report: Path) -> tuple[int, str, float]:
    """Run the peer's files on our adapter; its exit code, output and seconds."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        PYTHONPATH=str(PLUGIN_DIR),
        PYTHONDONTWRITEBYTECODE="1",
        **{plugin.PEER_ENV: peer, plugin.KIND_ENV: kind, plugin.REPORT_ENV: str(report)},
    )
    command = [
        sys.executable, "-m", "pytest",
        "-p", "sessionstore_peer_plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
        "-c", str(where / "pyproject.toml"), "--rootdir", str(where), "-o", "addopts=",
        "-o", "xfail_strict=true", "-q", "-rfE", "--tb=short", "--color=no",
        *OPTIONS[peer], *plugin.FILES[peer],
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=where, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


@pytest.mark.parametrize("kind", plugin.RUN)
@pytest.mark.parametrize("peer", plugin.PEERS)
def test_peer_suite_passes_on_our_adapter(
    peer: str, kind: str, tmp_path: Path, record_property: Any
) -> None:
    where = peer_tests_or_skip(peer)
    report_path = tmp_path / "report.json"
    code, output, seconds = run_peer_suite(peer, kind, where, report_path)
    record_property("seconds", round(seconds, 1))
    print(f"{peer} on {kind}: {seconds:.1f} s")
    timeout = Path(f"{report_path}.timeout")
    if timeout.is_file() and timeout.stat().st_size:
        pytest.fail(f"a test took over {plugin.TEST_TIMEOUT} s:\n{timeout.read_text()}")
    if not report_path.is_file():
        pytest.fail(f"the run ended without a report (exit {code}):\n{output[-6000:]}")
    report = json.loads(report_path.read_text())
    tests: dict[str, dict[str, str]] = report["tests"]
    bad = {
        name: entry.get("message", "")
        for name, entry in tests.items()
        if entry["outcome"] in ("failed", "error")
    }
    assert bad == {}, f"failures on our adapter (exit {code}):\n{output[-6000:]}"
    assert code == 0, output[-6000:]

    version = f"{peer}=={importlib.metadata.version(peer)}"
    counts = {outcome: 0 for outcome in ("passed", "skipped")}
    for entry in tests.values():
        counts[entry["outcome"]] += 1
    assert version in EXPECTED_TESTS, f"{version} is new: its counts are {counts}"
    assert len(tests) == EXPECTED_TESTS[version], f"{version}: {counts}"
    assert counts["passed"] > 0
    not_ours = {
        name: entry.get("reason")
        for name, entry in tests.items()
        if entry["outcome"] == "skipped"
        and not entry.get("reason", "").removeprefix("Skipped: ").startswith("sessionstore:")
    }
    assert not_ours == {}, "skips not listed in tests/peers/sessionstore_peer_plugin.py"
    assert report["unmatched"] == [], "names listed in the plugin that match no test"
    assert report["built"], "the stand-ins built nothing: the peer's tests missed them"
