"""A pytest plugin that runs Google ADK's own session-service tests on `StoreSessionService`.

ADK keeps the contract every ``BaseSessionService`` owes its callers in
``tests/unittests/sessions/test_session_service.py``: each test that takes
the ``session_service`` fixture runs once per backend registered in
``tests/unittests/sessions/_conformance.py`` (``BACKENDS``). This plugin
puts `StoreSessionService` there in place of ADK's own services, on a
memory store, a SQLite store and a PostgreSQL store (one schema per test),
and runs the test bodies unchanged.

How to run it (locally, by hand)::

    # 1. ADK's two files, from google/adk-python at the version matching the
    #    installed google-adk, laid out as in that repository (their code is
    #    never part of this one):
    #      $SESSIONSTORE_ADK_TESTS/tests/unittests/sessions/_conformance.py
    #      $SESSIONSTORE_ADK_TESTS/tests/unittests/sessions/test_session_service.py
    # 2. From that directory, with this worktree importable:
    cd "$SESSIONSTORE_ADK_TESTS"
    PYTHONPATH=/path/to/sessionstore:/path/to/sessionstore/tests/peers \\
      SESSIONSTORE_PG_URL=postgresql+psycopg://... \\
      /path/to/sessionstore/.venv/bin/python -m pytest -p sessionstore_adk_plugin \\
      -p no:cacheprovider -o asyncio_default_fixture_loop_scope=function \\
      tests/unittests/sessions/test_session_service.py

Their files at google/adk-python commit 11cc0931 (both files at one
commit, every import resolving against google-adk 2.13.0's modules) ran
here on memory, SQLite and PostgreSQL stores with google-adk 2.13.0: 99 passed, 5 expected
failures (`DIVERGENCES`, `SUBSTITUTED`), 63 not run (ADK's own services).
``tests/integrations/test_adk_peer_plugin.py`` checks this plugin on a
stand-in of ours laid out as ADK's files are.

``SESSIONSTORE_ADK_TESTS`` defaults to ``/tmp/adk-peer-tests``;
``SESSIONSTORE_ADK_KINDS`` (comma-separated, default ``memory,sqlite`` and
``postgresql`` when ``SESSIONSTORE_PG_URL`` is set) picks the stores.

Why it cannot run in CI here: the sdist and wheel of google-adk ship no
tests (unlike openai-agents' and langchain-core's, which
``tests/integrations/test_peer_suites.py`` runs), so the files come only
from ADK's git repository, and CI reaches package registries alone, not
GitHub. A test that downloaded them would fail there; one that skipped
without them would hide that it never ran. So this runs by hand, and its
outcome is recorded where the service's divergences are: `DIVERGENCES`.

What runs and what does not, in one place:

- every test taking ADK's ``session_service`` fixture, on each kind of
  `KINDS_ENV`; a test ours fails by design is in `DIVERGENCES` with its
  reason and marked ``xfail(strict=True)``, as ADK marks its own backends'
  divergences, so a fix shows up as a failure to delete the entry;
- the tests that build their service with ADK's ``get_session_service``
  (parametrized by ``service_type``) run with `StoreSessionService` on a
  memory store in its place (`SUBSTITUTED`);
- every other test exercises one of ADK's own services by name
  (``DatabaseSessionService``'s engine, tables and SQLAlchemy sessions,
  ``InMemorySessionService``'s sync API and internals, Vertex AI,
  ``SqliteSessionService``'s URLs) or passes its own ADK service as
  ``session_service``: deselected, named in the terminal summary.

Before their files are imported, the plugin also stands in for one import
``_conformance`` makes of a test module that is not among them
(``tests/unittests/integrations/redis/_fake_redis.py``, a fake Redis for
ADK's Redis backend, which this run does not use) and writes the empty
``__init__.py`` files of their package layout where they are missing.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import types
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT_ENV = "SESSIONSTORE_ADK_TESTS"
KINDS_ENV = "SESSIONSTORE_ADK_KINDS"
PG_ENV = "SESSIONSTORE_PG_URL"
DEFAULT_ROOT = "/tmp/adk-peer-tests"

PACKAGE = "tests.unittests.sessions"
"""ADK's package of session tests, as its repository lays it out."""
FILES = ("_conformance.py", "test_session_service.py")
"""ADK's files this plugin needs, in `PACKAGE`."""
FAKE_REDIS = "tests.unittests.integrations.redis._fake_redis"
"""The module of a fake Redis ``_conformance`` imports for its Redis backend (unused here)."""

_STALE = (
    "StoreSessionService never raises StaleSessionError: an append from a session "
    "object another run has moved past is stored after the newer events, its state "
    "merged again (sessionstore/integrations/adk.py, Concurrency), where ADK's "
    "database service rejects the stale writer"
)
_CONTEXT = "uses the service as an async context manager, which only DatabaseSessionService is"

DIVERGENCES: dict[str, str] = {}
"""Contract test name -> why `StoreSessionService` fails it today."""

SUBSTITUTED: dict[str, str | None] = {
    "test_append_event_with_non_serializable_state_delta": None,
    "test_append_event_to_deleted_session_raises_session_not_found": None,
    "test_get_session_orders_tied_timestamps_by_id": None,
    **dict.fromkeys(
        (
            "test_get_session_orders_tied_timestamps_by_id[True-SessionServiceType.DATABASE]",
            "test_get_session_orders_tied_timestamps_by_id[True-SessionServiceType.SQLITE]",
        ),
        "StoreSessionService gives events back in the order they were appended (the "
        "store's order), as InMemorySessionService does; ADK's SQL services sort them by "
        "timestamp, then id, so events of one timestamp appended in reverse come back by id",
    ),
    "test_append_event_to_stale_session": f"{_CONTEXT}; and {_STALE}",
    "test_append_event_concurrent_stale_sessions_reject_stale_writer": f"{_CONTEXT}; and {_STALE}",
    "test_sqlite_append_event_uses_typed_stale_session_error": _STALE,
}
"""Tests that build their service with ``get_session_service``: run on ours
(a memory store) in its place; a reason marks a known divergence (xfail),
for every case of the test or (named with its parameters) one."""


# ================================================================ the backends


class PostgresSchemas:
    """A new schema per test on the server of ``SESSIONSTORE_PG_URL``, all dropped at the end.

    tests/conftest.py's twin, written again: ADK's files are the package
    ``tests`` in this run, so ours (``tests.conftest``) cannot be imported."""

    def __init__(self, url: str) -> None:
        from sqlalchemy.engine import make_url

        self.base = make_url(url)
        self.conninfo = self.base.set(drivername="postgresql").render_as_string(hide_password=False)
        self.made: list[str] = []

    def new(self) -> str:
        import psycopg

        name = f"adk_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        self.made.append(name)
        options = {"options": f"-csearch_path={name}"}
        return self.base.update_query_dict(options).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        import psycopg

        if not self.made:
            return
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            for name in self.made:
                connection.execute(f"DROP SCHEMA {name} CASCADE")
        self.made.clear()


Maker = Callable[[Path], AbstractAsyncContextManager[Any]]


def _maker(target: Callable[[Path], str]) -> Maker:
    """A backend's make: `StoreSessionService` on a store opened on ``target(tmp_path)``."""

    @asynccontextmanager
    async def make(tmp_path: Path) -> AsyncIterator[Any]:
        from sessionstore import open_store
        from sessionstore.integrations.adk import StoreSessionService

        async with open_store(target(tmp_path)) as store:
            yield StoreSessionService(store)

    return make


def backends(kinds: list[str], schemas: PostgresSchemas | None, make_backend: Any) -> list[Any]:
    """ADK ``_conformance._Backend`` entries, one per kind of store."""
    targets: dict[str, Callable[[Path], str]] = {
        "memory": lambda tmp_path: "memory://",
        "sqlite": lambda tmp_path: f"sqlite:///{tmp_path / 'sessionstore.db'}",
    }
    if schemas is not None:
        targets["postgresql"] = lambda tmp_path: schemas.new()
    return [
        make_backend(f"sessionstore_{kind}", _maker(targets[kind]), divergences=DIVERGENCES)
        for kind in kinds
    ]


def _kinds() -> list[str]:
    told = os.environ.get(KINDS_ENV)
    if told:
        kinds = [kind.strip() for kind in told.split(",") if kind.strip()]
    else:
        kinds = ["memory", "sqlite", *(["postgresql"] if os.environ.get(PG_ENV) else [])]
    unknown = sorted(set(kinds) - {"memory", "sqlite", "postgresql"})
    if unknown:
        raise pytest.UsageError(
            f"{KINDS_ENV}: unknown kinds {unknown} (memory, sqlite, postgresql)"
        )
    if "postgresql" in kinds and not os.environ.get(PG_ENV):
        raise pytest.UsageError(f"{KINDS_ENV} names postgresql but {PG_ENV} is not set")
    return kinds


# ================================================================ their package


def _prepare(root: Path) -> types.ModuleType:
    """Make ADK's package importable from ``root``, stand in for the module
    it lacks, and import ``_conformance`` (before the test module does)."""
    where = root.joinpath(*PACKAGE.split("."))
    missing = [name for name in FILES if not (where / name).is_file()]
    if missing:
        raise pytest.UsageError(
            f"{where}: ADK's {', '.join(missing)} are not there; see "
            "tests/peers/sessionstore_adk_plugin.py for where they come from"
        )
    package = root
    for part in PACKAGE.split("."):
        package = package / part
        (package / "__init__.py").touch(exist_ok=True)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for name in ("tests.unittests.integrations", "tests.unittests.integrations.redis"):
        module = types.ModuleType(name)
        module.__path__ = []
        sys.modules.setdefault(name, module)
    fake = types.ModuleType(FAKE_REDIS)

    class FakeRedisAsync:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("the sessionstore run of ADK's tests registers no Redis backend")

    fake.FakeRedisAsync = FakeRedisAsync  # type: ignore[attr-defined]
    sys.modules.setdefault(FAKE_REDIS, fake)
    return importlib.import_module(f"{PACKAGE}._conformance")


def _get_session_service(service_type: object = None, tmp_path: Path | None = None) -> Any:
    """ADK's ``get_session_service(service_type, tmp_path)``, giving ours on a memory store."""
    from sessionstore import MemoryStore
    from sessionstore.integrations.adk import StoreSessionService

    return StoreSessionService(MemoryStore())


# ================================================================ pytest hooks


class Plugin:
    """One run: our backends in ADK's registry, and what was left out."""

    def __init__(self, root: Path, kinds: list[str]) -> None:
        self.schemas = PostgresSchemas(os.environ[PG_ENV]) if "postgresql" in kinds else None
        conformance = _prepare(root)
        ours = backends(kinds, self.schemas, conformance._Backend)
        conformance.BACKENDS[:] = ours
        # The test module imports the fixture by name from _conformance: ours, by then.
        setattr(conformance, "session_service", self.fixture(ours))  # noqa: B010
        self.left_out: list[tuple[str, str]] = []

    @staticmethod
    def fixture(ours: list[Any]) -> Any:
        """ADK's ``session_service`` fixture, over our backends (its body as ADK's)."""

        @pytest.fixture(name="session_service", params=ours, ids=lambda backend: backend.name)
        async def session_service(
            request: pytest.FixtureRequest, tmp_path: Path
        ) -> AsyncIterator[Any]:
            backend = request.param
            divergence = backend.divergences.get(request.node.originalname)
            if divergence is not None:
                request.node.add_marker(pytest.mark.xfail(strict=True, reason=divergence))
            async with backend.make(tmp_path) as service:
                yield service

        return session_service

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        kept: list[pytest.Item] = []
        for item in items:
            reason = self._left_out_because(item)
            if reason is None:
                kept.append(item)
            else:
                self.left_out.append((item.nodeid, reason))
        if self.left_out:
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept

    def _left_out_because(self, item: pytest.Item) -> str | None:
        """None when ``item`` runs on our service (putting it there), else why not."""
        function = getattr(item, "obj", None)
        name = getattr(item, "originalname", item.name)
        parameters = inspect.signature(function).parameters if function else {}
        callspec = getattr(item, "callspec", None)
        if "session_service" in parameters:
            if callspec is not None and "session_service" in callspec.params:
                given = callspec.params["session_service"]
                if type(given).__module__.startswith("google.adk"):
                    return f"parametrized with ADK's own {type(given).__name__}"
            return None
        if name in SUBSTITUTED:
            module = item.module  # type: ignore[attr-defined]
            module.get_session_service = _get_session_service
            reason = SUBSTITUTED.get(item.name, SUBSTITUTED[name])
            if reason is not None:
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
            return None
        return "exercises one of ADK's own services, not the contract fixture"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.left_out:
            return
        terminalreporter.section("sessionstore: ADK tests not run on StoreSessionService")
        for nodeid, reason in self.left_out:
            terminalreporter.write_line(f"{nodeid}: {reason}")

    def pytest_unconfigure(self) -> None:
        if self.schemas is not None:
            self.schemas.drop_all()


def pytest_configure(config: pytest.Config) -> None:
    root = Path(os.environ.get(ROOT_ENV, DEFAULT_ROOT)).resolve()
    if getattr(config.option, "asyncio_mode", None) in (None, "strict"):
        config.option.asyncio_mode = "auto"  # ADK's async fixtures are plain pytest fixtures
    config.pluginmanager.register(Plugin(root, _kinds()), "sessionstore_adk")
