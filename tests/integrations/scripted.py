"""An openai-agents model answering from a script, and the responses and
agent the adapter tests script it with.

Import it after ``require("agents", extra="openai-agents")``, as the test
modules do (`tests.integrations.require`).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any, cast

from agents import Agent, RunConfig, TResponseInputItem, Usage, function_tool
from agents.items import ModelResponse, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

NO_TRACING = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """A model answering from a script, one response per call, keeping each input."""

    def __init__(self, *responses: list[TResponseOutputItem]) -> None:
        self.responses = list(responses)
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        given = [{"content": input, "role": "user"}] if isinstance(input, str) else input
        self.inputs.append(copy.deepcopy(cast(list[dict[str, Any]], given)))
        return ModelResponse(output=self.responses.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests run the model without streaming")


def answer(text: str, item_id: str) -> list[TResponseOutputItem]:
    """A response: the assistant's message ``text``."""
    part = ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])
    return [
        ResponseOutputMessage(
            id=item_id, type="message", role="assistant", status="completed", content=[part]
        )
    ]


def call_clock(call_id: str) -> list[TResponseOutputItem]:
    """A response: a call of the `clock` tool."""
    return [
        ResponseFunctionToolCall(
            id=f"fc_{call_id}", call_id=call_id, type="function_call", name="clock", arguments="{}"
        )
    ]


def calls(*numbers: int) -> list[TResponseOutputItem]:
    """A response: a call of a ``send`` tool per number ``n``, ``{"to": "u<n>"}``."""
    return [
        ResponseFunctionToolCall(
            id=f"fc_{n}",
            call_id=f"call_{n}",
            type="function_call",
            name="send",
            arguments=f'{{"to": "u{n}"}}',
        )
        for n in numbers
    ]


@function_tool
def clock() -> str:
    """The time of day."""
    return "09:00"


def agent_on(model: ScriptedModel) -> Agent[Any]:
    """An agent on ``model`` that tells the time with the `clock` tool."""
    return Agent(name="assistant", instructions="Tell the time.", model=model, tools=[clock])
