"""The rules of tool exchanges, one module per dialect, each with the same
shape: ``exchanges(messages)`` walks a list of messages and finds every call,
result and orphan; ``repair(messages)`` gives the list the API takes. The
public functions over them are in `sessionstore.context`."""

from __future__ import annotations

import importlib
from typing import Literal

from sessionstore.errors import ConfigurationError
from sessionstore.pairing.exchanges import Rules

__all__ = ["PairingDialect", "rules"]

PairingDialect = Literal["openai", "anthropic", "openai-agents"]
"""The message shapes whose tool exchanges sessionstore knows: OpenAI Chat
Completions, Anthropic Messages, and openai-agents (Responses API) items."""

# Each dialect's module, loaded when its rules are first asked for.
_MODULES = {"openai": "openai_chat", "anthropic": "anthropic", "openai-agents": "openai_agents"}


def rules(dialect: object) -> Rules:
    """The rules of a dialect.

    Raises:
        ConfigurationError: not a dialect sessionstore knows.
    """
    if isinstance(dialect, str) and dialect in _MODULES:
        return _loaded(dialect)
    known = ", ".join(repr(name) for name in _MODULES)
    raise ConfigurationError(f"unknown tool-call dialect {dialect!r}: one of {known}")


def _loaded(dialect: str) -> Rules:
    # importlib keeps each module once loaded (sys.modules): nothing else is kept.
    module = importlib.import_module(f"{__name__}.{_MODULES[dialect]}")
    return Rules(module.exchanges, module.repair)
