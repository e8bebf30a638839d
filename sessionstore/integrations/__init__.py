"""Adapters between sessionstore and agent frameworks, one module per framework.

Each module imports its framework, an optional extra of its own
(``pip install 'sessionstore[langchain]'``, ``'sessionstore[openai-agents]'``,
``'sessionstore[pydantic-ai]'``), and raises an `ImportError` naming that
extra when it is missing. Importing `sessionstore` (or this package)
imports no framework. The modules use only the public API of `sessionstore`
and `sessionstore.sync`; docs/integrations.md tells how each one maps the
framework's messages.
"""
