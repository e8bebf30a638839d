"""The rules of tool exchanges, one module per dialect, each with the same
shape: ``exchanges(messages)`` walks a list of messages and finds every call,
result and orphan; ``repair(messages)`` gives the list the API takes. The
public functions over them are in `sessionstore.context`."""

from __future__ import annotations

from typing import Literal

from sessionstore.errors import ConfigurationError
from sessionstore.pairing import anthropic, openai_agents, openai_chat
from sessionstore.pairing.exchanges import Rules

__all__ = ["PairingDialect", "rules"]

PairingDialect = Literal["openai", "anthropic", "openai-agents"]
"""The message shapes whose tool exchanges sessionstore knows: OpenAI Chat
Completions, Anthropic Messages, and openai-agents (Responses API) items."""

DIALECTS: dict[str, Rules] = {
    "openai": Rules(openai_chat.exchanges, openai_chat.repair),
    "anthropic": Rules(anthropic.exchanges, anthropic.repair),
    "openai-agents": Rules(openai_agents.exchanges, openai_agents.repair),
}


def rules(dialect: object) -> Rules:
    """The rules of a dialect.

    Raises:
        ConfigurationError: not a dialect sessionstore knows.
    """
    if isinstance(dialect, str) and dialect in DIALECTS:
        return DIALECTS[dialect]
    known = ", ".join(repr(name) for name in DIALECTS)
    raise ConfigurationError(f"unknown tool-call dialect {dialect!r}: one of {known}")
