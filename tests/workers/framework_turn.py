"""A separate process that runs one agent turn whose tools go through
`EffectLog.once`, for kill tests (tests/integrations/test_effects_tools.py).

Usage: python framework_turn.py FRAMEWORK DB COUNTER

FRAMEWORK is ``openai-agents`` (a `Runner` turn on a scripted model that
calls the tool ``bump_tool`` six times, one call a response, then answers)
or ``pydantic-ai`` (an agent on ``TestModel``, which calls each of the
tools ``bump_a``, ``bump_b``, ``bump_c`` once, side by side). A call found
in doubt is settled by a check that looks in COUNTER, as a real one would
ask the service the tool called. Each call appends its name to the file
COUNTER, syncs it, prints ``tool NAME`` and takes 50 ms more: the world the
tools change.

Kill tests run it under tests/workers/forking.py, a turn in a child forked
per run; the framework is imported once, before the forks (under the
server, this module's name is ``forked_worker``). A turn prints ``ready``,
then ``end`` (or ``doubt`` when a call was found in doubt).
"""

import asyncio
import os
import sys
import time
from typing import Any

from sessionstore import NOT_DONE, Effect, EffectInDoubtError, open_store

CHAT = "chat"
CALLS = 6


def checker(counter: str) -> Any:
    """The check of a call in doubt: whether its name is in COUNTER (the
    end of its key ``chat:call_3`` is ``n3``; the tool ``bump_a`` is ``a``)."""

    def check(intent: Effect) -> Any:
        if intent.tool == "bump_tool":  # keyed by the call id, call_N
            name = f"n{intent.key.rsplit('_', 1)[-1]}"
        else:  # keyed by the turn: the tool's name ends with it
            name = str(intent.tool).rsplit("_", 1)[-1]
        try:
            with open(counter) as file:
                done = name in file.read().split()
        except FileNotFoundError:
            done = False
        return f"bumped {name}" if done else NOT_DONE

    return check


def bump(counter: str, name: str) -> str:
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{name}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    print("tool", name, flush=True)  # done: the kill test may strike from here
    time.sleep(0.05)
    return f"bumped {name}"


def openai_agents_turn(db: str, counter: str) -> Any:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from sessionstore.integrations.openai_agents import StoreSession, once_tool

    @function_tool
    def bump_tool(n: int) -> str:
        """Bump the counter."""
        return bump(counter, f"n{n}")

    class Scripted(Model):
        def __init__(self) -> None:
            self.calls = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            n, self.calls = self.calls, self.calls + 1
            if n < CALLS:
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        id=f"fc_{n}",
                        call_id=f"call_{n}",
                        type="function_call",
                        name="bump_tool",
                        arguments=f'{{"n": {n}}}',
                    )
                ]
            else:
                text = ResponseOutputText(
                    text="done", type="output_text", annotations=[], logprobs=[]
                )
                output = [
                    ResponseOutputMessage(
                        id="msg",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    async def turn() -> None:
        async with open_store(db) as store:
            effects = store.journal("agent").effects
            tool = once_tool(bump_tool, effects, session=CHAT, check=checker(counter))
            agent = Agent(name="a", instructions="Bump.", model=Scripted(), tools=[tool])
            print("ready", flush=True)
            await Runner.run(
                agent,
                "go",
                session=StoreSession(store, CHAT),
                run_config=RunConfig(tracing_disabled=True),
            )

    return turn


def pydantic_ai_turn(db: str, counter: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset

    from sessionstore.integrations.pydantic_ai import OnceToolset

    def bump_a() -> str:
        """Bump a."""
        return bump(counter, "a")

    def bump_b() -> str:
        """Bump b."""
        return bump(counter, "b")

    def bump_c() -> str:
        """Bump c."""
        return bump(counter, "c")

    async def turn() -> None:
        async with open_store(db) as store:
            tools = FunctionToolset([bump_a, bump_b, bump_c])
            effects = store.journal("agent").effects
            toolset = OnceToolset(tools, effects, session=CHAT, check=checker(counter))
            agent = Agent(TestModel(), toolsets=[toolset])
            print("ready", flush=True)
            await agent.run("go")

    return turn


def child(turn: Any) -> None:
    try:
        asyncio.run(turn())
    except Exception as exc:  # the framework may wrap it
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, EffectInDoubtError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        print("doubt", flush=True)
        return
    print("end", flush=True)


def make_turn(framework: str, db: str, counter: str) -> Any:
    make = openai_agents_turn if framework == "openai-agents" else pydantic_ai_turn
    return make(db, counter)


if __name__ == "forked_worker":  # under tests/workers/forking.py: import the framework
    make_turn(*sys.argv[1:4])
if __name__ == "__main__":
    child(make_turn(*sys.argv[1:4]))
