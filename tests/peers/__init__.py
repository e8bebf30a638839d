"""The frameworks' own tests, run against our adapters.

The peers' test files are never part of this repository: `fetch` downloads
the source distributions of the installed openai-agents and langchain-core
from PyPI and extracts their tests outside it, and
``tests/integrations/test_peer_suites.py`` runs them, each in a pytest
subprocess, with `sessionstore_peer_plugin` putting our adapters in place
of the peers' session and history classes.

Google ADK's session-service tests are not in its sdist: they run by hand,
with `sessionstore_adk_plugin` registering `StoreSessionService` in ADK's
own registry of backends (that module says how, and why not in CI).
"""
