"""Adapters between sessionstore and agent frameworks, one module per framework.

Each module imports its framework, an optional extra of its own
(``pip install 'sessionstore[langchain]'``...), and raises an `ImportError`
naming that extra when it is missing; importing this package imports none.
The modules use only the public API (docs/integrations.md).
"""
