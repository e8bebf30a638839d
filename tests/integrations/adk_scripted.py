"""An ADK model answering from a script, and the agent the ADK tests run on it.

Import it after ``require("google.adk", extra="adk")``, as the test modules
do (`tests.integrations.require`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field


class ScriptedLlm(BaseLlm):
    """A model answering from a script, one response per call, keeping each request's contents."""

    model: str = "scripted"
    script: list[LlmResponse] = Field(default_factory=list)
    seen: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append([content.model_copy(deep=True) for content in llm_request.contents])
        yield self.script.pop(0)


def says(text: str) -> LlmResponse:
    """A response: the model's text."""
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def calls(name: str, call_id: str, **args: Any) -> LlmResponse:
    """A response: a call of the tool ``name``."""
    call = types.FunctionCall(id=call_id, name=name, args=args)
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def text_of(event: Event) -> str:
    """What an event says: its text parts, joined."""
    parts = event.content.parts if event.content and event.content.parts else []
    return "".join(part.text or "" for part in parts)


def user_text(text: str) -> types.Content:
    """A user's message."""
    return types.Content(role="user", parts=[types.Part(text=text)])


def weather(city: str) -> dict[str, str]:
    """The weather in a city (the tool the agent is given)."""
    return {"city": city, "forecast": f"sunny in {city}"}


def agent_on(model: ScriptedLlm) -> LlmAgent:
    """An agent on ``model`` with the `weather` tool, keeping its answer in state."""
    return LlmAgent(
        name="forecaster",
        model=model,
        instruction="Answer with the weather.",
        tools=[weather],
        output_key="last_answer",
    )
