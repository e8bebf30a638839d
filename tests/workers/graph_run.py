"""A real LangGraph agent for the checkpointer tests: a scripted chat
model, a tool node, a human's approval asked by ``interrupt()`` in a
subgraph, and what a test reads of its checkpoints, up to ids.

The model reads what it is given, as a live one does: to a user's
message naming a city it answers with a call to ``lookup`` (the city its
message's last word), to a tool's output with the answer. Its ids come
from the conversation, so every run of the graph says the same. The
answer then goes through the subgraph ``review``, whose node ``approve``
asks a human (``interrupt``) and says what they said. Nothing here
depends on a checkpointer: the tests run it on each and compare
(tests/integrations/test_langgraph_graph.py).

Usage: python graph_run.py TARGET

Run as a script, it drives the graph's thread ``trip`` on a `StoreSaver`
over the store TARGET (`open_store`) to its end, as a program run again
after a crash would: a new thread is given the user's message, one cut
short is continued from its latest checkpoint (``resumed ID latest``), the
review approved whenever it asks. The model calls its tool `STEPS` times,
each answer and each call taking a few milliseconds, so a kill test
(under tests/workers/forking.py) cuts runs in the middle. It prints
``ready``, then ``checkpoint ID stored`` for each checkpoint of the
thread once the saver has acknowledged it, then ``end`` (a line ends in a
word of its own, so that a line a kill cut short is told apart).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, StateSnapshot, interrupt


class ScriptedModel(BaseChatModel):
    """A chat model answering from the conversation alone (see the module's docstring)."""

    delay: float = 0.0
    """Seconds each answer takes (a kill test cuts runs in the middle)."""
    steps: int = 1
    """Tool calls to answer a user's message with, one after the other."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.answer(messages))])

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        await asyncio.sleep(self.delay)
        return self._generate(messages)

    def answer(self, messages: list[BaseMessage]) -> AIMessage:
        asked = max(n for n, message in enumerate(messages) if isinstance(message, HumanMessage))
        outputs = [m for m in messages[asked:] if isinstance(m, ToolMessage)]
        number = len(messages)
        city = str(messages[asked].content).split()[-1]
        if len(outputs) < self.steps:
            call = {"name": "lookup", "args": {"city": city}, "id": f"call-{number}"}
            return AIMessage(content="", tool_calls=[call], id=f"ai-{number}")
        said = "; ".join(str(output.content) for output in outputs)
        return AIMessage(content=f"In {city}: {said}.", id=f"ai-{number}")


STEPS = 6
"""Tool calls of the kill test's run."""
DELAY = 0.01
"""Seconds each answer and each tool call of the kill test's run take."""
THREAD: Any = {"configurable": {"thread_id": "trip"}}


@tool
async def lookup(city: str, config: RunnableConfig) -> str:
    """The weather in a city."""
    await asyncio.sleep(config["configurable"].get("tool_delay", 0.0))
    return f"sunny in {city}"


def review() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The subgraph: a human approves the answer (``interrupt``); the node
    says what they answered. Compiled without a checkpointer: it takes its
    parent's, under a namespace of its own."""

    def approve(state: MessagesState) -> dict[str, list[BaseMessage]]:
        answer = state["messages"][-1]
        verdict = interrupt({"approve": answer.content})
        return {"messages": [AIMessage(content=f"reviewed: {verdict}", id=f"review-{answer.id}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    return builder.compile()


def agent(
    checkpointer: BaseCheckpointSaver[Any] | None, model: ScriptedModel | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The graph: ``agent`` (the model) calls ``tools`` until it answers,
    then the subgraph ``review``."""
    model = model or ScriptedModel()

    async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_node("review", review())
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "review"})
    builder.add_edge("tools", "agent")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


class Names:
    """Ids renamed in the order they are first seen (``id1``, ``id2`` ...):
    two runs compare equal up to ids, and which ids are the same still counts."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def __call__(self, value: str | None) -> str | None:
        if value is None:
            return None
        return self._names.setdefault(value, f"id{len(self._names) + 1}")


def message(names: Names, said: BaseMessage) -> tuple[Any, ...]:
    calls = [
        (call["name"], call["args"], names(call["id"])) for call in getattr(said, "tool_calls", [])
    ]
    return (
        said.type,
        said.content,
        names(said.id),
        calls,
        names(getattr(said, "tool_call_id", None)),
    )


def checkpoint_id(config: Any) -> str | None:
    return None if config is None else config["configurable"].get("checkpoint_id")


def snapshot(names: Names, state: StateSnapshot) -> dict[str, Any]:
    """What a test compares of a state: values, next, tasks and their
    interrupts (and subgraphs' states), metadata's source and step, its
    checkpoint and its parent, ids renamed."""
    tasks = []
    for task in state.tasks:
        inner = snapshot(names, task.state) if isinstance(task.state, StateSnapshot) else None
        interrupts = [(names(one.id), one.value) for one in task.interrupts]
        tasks.append((names(task.id), task.name, interrupts, inner))
    metadata = state.metadata or {}
    return {
        "messages": [message(names, said) for said in state.values.get("messages", [])],
        "next": state.next,
        "tasks": tasks,
        "interrupts": [(names(one.id), one.value) for one in state.interrupts],
        "source": metadata.get("source"),
        "step": metadata.get("step"),
        "checkpoint": names(checkpoint_id(state.config)),
        "parent": names(checkpoint_id(state.parent_config)),
    }


def reporting(saver_class: type[BaseCheckpointSaver[Any]]) -> Any:
    """``saver_class``, printing each checkpoint of the thread's own namespace once stored."""

    class Reporting(saver_class):  # type: ignore[valid-type,misc]
        async def aput(self, config: Any, *args: Any, **kwargs: Any) -> Any:
            stored = await super().aput(config, *args, **kwargs)
            if not stored["configurable"].get("checkpoint_ns"):
                print("checkpoint", stored["configurable"]["checkpoint_id"], "stored", flush=True)
            return stored

    return Reporting


async def drive(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    """The thread to its end: begun, or continued from its latest checkpoint."""
    config: Any = {"configurable": {**THREAD["configurable"], "tool_delay": DELAY}}
    state = await graph.aget_state(THREAD)
    given: Any = {"messages": [HumanMessage("weather in Paris")]}
    if checkpoint_id(state.config) is not None:
        print("resumed", checkpoint_id(state.config), "latest", flush=True)
        # None continues a run cut short, even where the state shows no next
        # step: a step's writes stored, its checkpoint not (langgraph's
        # get_state applies them, and names no task then).
        given = Command(resume="approved") if state.interrupts else None
    await graph.ainvoke(given, config)
    while (state := await graph.aget_state(THREAD)).next:
        await graph.ainvoke(Command(resume="approved") if state.interrupts else None, config)


async def main(target: str) -> None:
    from sessionstore import open_store
    from sessionstore.integrations.langgraph import StoreSaver

    async with open_store(target) as store:
        graph = agent(reporting(StoreSaver)(store), ScriptedModel(steps=STEPS, delay=DELAY))
        print("ready", flush=True)
        await drive(graph)
    print("end", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
