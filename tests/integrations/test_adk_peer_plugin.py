"""`sessionstore_adk_plugin` (tests/peers) puts `StoreSessionService` into
ADK's registry of session-service backends.

ADK's own test files cannot be had here (the plugin's docstring says why),
so these tests run the plugin, in a pytest subprocess, on a stand-in of
ours laid out as ADK's are: a ``_conformance`` module with a ``BACKENDS``
list and a ``session_service`` fixture over it, and a test module that
imports that fixture.

Without google-adk these tests skip (fail under CI=true): `require`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.integrations import require

require("google.adk", extra="adk")

from tests.peers import sessionstore_adk_plugin as plugin

ROOT = Path(__file__).parents[2]

CONFORMANCE = """
import contextlib
import dataclasses
from collections.abc import Mapping

import pytest
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from ..integrations.redis._fake_redis import FakeRedisAsync  # noqa: F401


@dataclasses.dataclass(frozen=True)
class _Backend:
    name: str
    make: object
    divergences: Mapping[str, str] = dataclasses.field(default_factory=dict)


@contextlib.asynccontextmanager
async def _make_in_memory(tmp_path):
    yield InMemorySessionService()


BACKENDS = [_Backend("in_memory", _make_in_memory)]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
async def session_service(request, tmp_path):
    async with request.param.make(tmp_path) as service:
        yield service
"""

TESTS = """
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from ._conformance import session_service  # noqa: F401


def get_session_service(service_type=None, tmp_path=None):
    return InMemorySessionService()


async def test_state_round_trip(session_service):
    assert type(session_service).__name__ == "StoreSessionService"
    made = await session_service.create_session(app_name="a", user_id="u", state={"k": 1})
    got = await session_service.get_session(app_name="a", user_id="u", session_id=made.id)
    assert got.state == {"k": 1}


async def test_append_event_to_deleted_session_raises_session_not_found():
    assert type(get_session_service()).__name__ == "StoreSessionService"


def test_of_adk_own_service():
    raise AssertionError("takes no contract fixture: must not run")
"""

DIVERGING = """

async def {name}(session_service):
    raise AssertionError("a divergence the plugin lists")
"""

STAND_IN_DIVERGENCE = "test_a_divergence_of_the_stand_in"
"""A divergence the run adds to the plugin's (`LISTED`), so a listed
divergence is checked even while the plugin lists none."""

LISTED = f"""
import sessionstore_adk_plugin

sessionstore_adk_plugin.DIVERGENCES[{STAND_IN_DIVERGENCE!r}] = "the stand-in fails it by design"
"""


def divergences() -> list[str]:
    """The divergences of a run: the plugin's and the stand-in's."""
    return [*plugin.DIVERGENCES, STAND_IN_DIVERGENCE]


def run_plugin(where: Path, kinds: str) -> subprocess.CompletedProcess[str]:
    """Run the plugin on the stand-in, written to ``where``, with a JUnit
    report at ``where/report.xml``."""
    package = where / "tests" / "unittests" / "sessions"
    package.mkdir(parents=True)
    (package / "_conformance.py").write_text(CONFORMANCE)
    diverging = "".join(DIVERGING.format(name=name) for name in divergences())
    (package / "test_session_service.py").write_text(TESTS + diverging)
    (where / "pytest.ini").write_text("[pytest]\n")
    (where / "conftest.py").write_text(LISTED)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests" / "peers")]),
        PYTHONDONTWRITEBYTECODE="1",
        **{plugin.ROOT_ENV: str(where), plugin.KINDS_ENV: kinds},
    )
    command = [
        sys.executable, "-m", "pytest", "-p", "sessionstore_adk_plugin",
        "-p", "no:cacheprovider", "-p", "no:xdist", "-c", str(where / "pytest.ini"),
        "--rootdir", str(where), "-o", "asyncio_default_fixture_loop_scope=function",
        "-q", f"--junitxml={where / 'report.xml'}",
        "tests/unittests/sessions/test_session_service.py",
    ]  # fmt: skip
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each stand-in test's outcome, by its name, in a run on memory and SQLite stores."""
    where = tmp_path_factory.mktemp("adk-layout")
    done = run_plugin(where, "memory,sqlite")
    report = where / "report.xml"
    assert report.is_file(), done.stdout + done.stderr
    found: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            kind = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            kind = "failed"
        else:
            kind = "passed"
        found[case.get("name", "")] = kind
    return found


def test_the_contract_fixture_gives_our_service_on_each_kind(outcomes: dict[str, str]) -> None:
    assert outcomes["test_state_round_trip[sessionstore_memory]"] == "passed"
    assert outcomes["test_state_round_trip[sessionstore_sqlite]"] == "passed"
    assert not [name for name in outcomes if "in_memory" in name]  # ADK's backend is gone


def test_a_listed_divergence_is_a_strict_expected_failure(outcomes: dict[str, str]) -> None:
    for name in divergences():
        assert outcomes[f"{name}[sessionstore_memory]"] == "xfailed"
        assert outcomes[f"{name}[sessionstore_sqlite]"] == "xfailed"


def test_get_session_service_gives_ours_where_substituted(outcomes: dict[str, str]) -> None:
    assert outcomes["test_append_event_to_deleted_session_raises_session_not_found"] == "passed"


def test_a_test_without_the_contract_fixture_does_not_run(outcomes: dict[str, str]) -> None:
    assert "test_of_adk_own_service" not in outcomes
    assert len(outcomes) == 3 + 2 * len(divergences())


def test_unknown_kinds_are_refused_by_name(tmp_path: Path) -> None:
    done = run_plugin(tmp_path, "memory,mongo")
    assert done.returncode != 0
    assert "unknown kinds ['mongo']" in done.stdout + done.stderr
