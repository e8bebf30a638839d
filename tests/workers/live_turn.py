"""One agent turn of each framework on a scripted model that answers as a
live one does, for the tests of effects through the frameworks' tools
(tests/integrations/test_effects_live.py) and their kill test.

Usage: python live_turn.py FRAMEWORK TARGET WORLD

FRAMEWORK is ``openai-agents``, ``pydantic-ai`` or ``langchain``; TARGET a
store (`open_store`). The model reads what it is given: it counts the tool
outputs since the turn's user message, asks for the next step of `PLAN`
(one call to ``send`` per name, side by side, each with a fresh id), and
once every step is answered, says "done". So a model asked again after a
crash gives other ids, and continues from what the conversation holds.
Each call of ``send`` appends its name to the file WORLD, syncs it, prints
``tool NAME`` and takes 20 ms more: the world the tools change. A call
found in doubt is settled by a check that counts the name in WORLD, as a
real one would ask the service the tool called.

The conversation is ``chat``, the effects are the journal ``agent``'s.
The turn of each framework keeps its conversation as that framework's
users do with sessionstore: openai-agents a `StoreSession`
(``continue_turn`` as its input callback), pydantic-ai `MessageHistories`
(the run's new messages saved at its end), LangChain a
`SessionStoreChatMessageHistory` that a small loop adds each step to.

Kill tests run it under tests/workers/forking.py, a turn in a child forked
per run (under the server, this module's name is ``forked_worker``). A
turn prints ``ready``, then ``end``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sessionstore import (
    NOT_DONE,
    DuplicateSessionError,
    Effect,
    SessionMeta,
    SessionStore,
    open_store,
)
from sessionstore.integrations import turns

CHAT = "chat"
PLAN = [["ada"], ["ada", "bob"], ["ada", "ada"]]
"""The turn's steps: the names each response sends to, side by side."""
EFFECTS = collections.Counter(name for step in PLAN for name in step)
"""What one turn does to the world: each name, as many times as it is sent to."""


def next_step(outputs: int) -> list[str] | None:
    """The step a model asks for once ``outputs`` tool outputs answered the
    turn's calls; None when every step is answered."""
    done = 0
    for step in PLAN:
        if done == outputs:
            return step
        done += len(step)
    assert done == outputs, f"{outputs} outputs do not end a step"
    return None


def fresh_id() -> str:
    return f"call_{uuid.uuid4().hex[:8]}"


class World:
    """What the tools change: the file ``path``, a name a line.

    Args:
        path: the file.
        after: called after each effect, with how many this object made:
            a test's crash, when it raises. The world is then dead, as the
            process would be: a call running beside it (in another thread,
            or a task the crash left) raises the same, and changes nothing.
    """

    def __init__(self, path: str, after: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.after = after
        self.made = 0
        self._dead: type[BaseException] | None = None
        self._lock = threading.Lock()

    def send(self, name: str) -> str:
        with self._lock:
            if self._dead is not None:
                raise self._dead()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{name}\n".encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            self.made += 1
            print("tool", name, flush=True)  # done: the kill test may strike from here
            try:
                if self.after is not None:
                    self.after(self.made)
            except BaseException as exc:
                self._dead = type(exc)
                raise
        time.sleep(0.02)
        return f"sent to {name}"

    def sent(self) -> collections.Counter[str]:
        """Each name, as many times as the world holds it."""
        try:
            with open(self.path) as file:
                return collections.Counter(file.read().split())
        except FileNotFoundError:
            return collections.Counter()


def checker(world: World) -> Callable[[Effect], Any]:
    """Whether the call in doubt happened: the world holds its name more
    times than its rank (the key's end) among the turn's calls to it."""
    names = {turns.digest({"to": name}): name for name in EFFECTS}

    def check(intent: Effect) -> Any:
        rank = int(intent.key.rsplit(":", 1)[1])
        name = names[str(intent.args)]
        return f"sent to {name}" if world.sent()[name] > rank else NOT_DONE

    return check


# ---------------------------------------------------------------- openai-agents


async def openai_agents_turn(store: SessionStore, world: World) -> None:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from sessionstore.integrations.openai_agents import StoreSession, continue_turn, once_tool

    class Live(Model):
        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            starts = [i for i, item in enumerate(items) if item.get("role") == "user"]
            turn = items[starts[-1] :]
            step = next_step(sum(item.get("type") == "function_call_output" for item in turn))
            output: list[Any]
            if step is None:
                text = ResponseOutputText(
                    text="done", type="output_text", annotations=[], logprobs=[]
                )
                message = ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed", content=[text]
                )
                output = [message]
            else:
                output = []
                for name in step:
                    call_id = fresh_id()
                    output.append(
                        ResponseFunctionToolCall(
                            id=f"fc_{call_id}",
                            call_id=call_id,
                            type="function_call",
                            name="send",
                            arguments=f'{{"to": "{name}"}}',
                        )
                    )
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def send(to: str) -> str:
        """Send a message."""
        return world.send(to)

    session = StoreSession(store, CHAT)
    tool = once_tool(send, store.journal("agent").effects, session=session, check=checker(world))
    agent = Agent(name="a", instructions="Send.", model=Live(), tools=[tool])
    config = RunConfig(tracing_disabled=True, session_input_callback=continue_turn)
    await Runner.run(agent, "go", session=session, run_config=config)


# ---------------------------------------------------------------- pydantic-ai


async def pydantic_ai_turn(store: SessionStore, world: World) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from sessionstore.integrations.pydantic_ai import MessageHistories, OnceToolset

    def live(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        starts = [
            i
            for i, message in enumerate(messages)
            if isinstance(message, ModelRequest)
            and any(isinstance(part, UserPromptPart) for part in message.parts)
        ]
        outputs = sum(
            isinstance(part, ToolReturnPart)
            for message in messages[starts[-1] :]
            for part in message.parts
        )
        step = next_step(outputs)
        if step is None:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart("send", {"to": name}, tool_call_id=fresh_id()) for name in step]
        )

    def send(to: str) -> str:
        """Send a message."""
        return world.send(to)

    histories = MessageHistories(store)
    with contextlib.suppress(DuplicateSessionError):  # the conversation's first turn
        await store.create(SessionMeta.new().model_copy(update={"id": CHAT}))
    toolset = OnceToolset(
        FunctionToolset([send]),
        store.journal("agent").effects,
        session=CHAT,
        check=checker(world),
    )
    history = await histories.load(CHAT)
    result = await Agent(FunctionModel(live), toolsets=[toolset]).run("go", message_history=history)
    await histories.save(CHAT, result.new_messages())


# ---------------------------------------------------------------- LangChain


async def langchain_turn(store: SessionStore, world: World) -> None:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    from sessionstore.integrations.langchain import OnceTool, SessionStoreChatMessageHistory

    class Live(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "live-script"

        def _generate(self, messages: Sequence[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
            turn = messages[starts[-1] :]
            step = next_step(sum(isinstance(message, ToolMessage) for message in turn))
            if step is None:
                message = AIMessage(content="done")
            else:
                calls = [
                    {"name": "send", "args": {"to": name}, "id": fresh_id(), "type": "tool_call"}
                    for name in step
                ]
                message = AIMessage(content="", tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def send(to: str) -> str:
        """Send a message."""
        return world.send(to)

    history = SessionStoreChatMessageHistory(store, CHAT)
    once = OnceTool(send, store.journal("agent").effects, history=history, check=checker(world))
    model = Live()
    await history.aadd_messages([HumanMessage("go")])
    while True:
        answer = await model.ainvoke(await history.aget_messages())
        assert isinstance(answer, AIMessage)
        outputs = await asyncio.gather(*(once.ainvoke(call) for call in answer.tool_calls))
        await history.aadd_messages([answer, *outputs])  # a step, stored whole
        if not answer.tool_calls:
            return


TURNS = {
    "openai-agents": openai_agents_turn,
    "pydantic-ai": pydantic_ai_turn,
    "langchain": langchain_turn,
}


async def child(framework: str, target: str, world: str) -> None:
    async with open_store(target) as store:
        print("ready", flush=True)
        await TURNS[framework](store, World(world))
    print("end", flush=True)


FRAMEWORKS = {
    "openai-agents": ["agents", "sessionstore.integrations.openai_agents"],
    "pydantic-ai": ["pydantic_ai", "sessionstore.integrations.pydantic_ai"],
    "langchain": ["langchain_core.language_models", "sessionstore.integrations.langchain"],
}
"""What each framework's turn imports: done once, before the forks."""

if __name__ == "forked_worker":  # under tests/workers/forking.py: import the framework
    for module in FRAMEWORKS[sys.argv[1]]:
        importlib.import_module(module)
if __name__ == "__main__":
    asyncio.run(child(*sys.argv[1:4]))
