"""A registry for worker subprocesses (``noeta worker --registry tests.support.registry:registry``).

Its provider is stateless, answering from the request alone, so any worker process gives the same
answer: ask for ``slow_append`` once, then report the tool's output.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry
from tests.support.scripts import call, say
from tests.support.tools import add, local_slow_append, plain_slow_append, slow_append


def calling(tool_name: str, seconds: float):
    """A stateless responder: call ``tool_name`` once, then report its output."""

    def respond(request: LLMRequest) -> LLMResponse:
        results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
        if not results:
            return call(("c1", tool_name, {"seconds": seconds, "text": request.messages[0].text}))
        return say(f"done: {results[0].output}")

    return respond


scripted = calling("slow_append", 4)
registry = Registry.of(tools=[slow_append, add], providers={"scripted": FakeLLMProvider(responder=scripted)})

#: The tool has no heartbeat_seconds of its own: Noeta's default heartbeat timeout applies.
default_heartbeat_registry = Registry.of(
    tools=[plain_slow_append], providers={"scripted": FakeLLMProvider(responder=calling("plain_slow_append", 2))}
)

#: The same task with a local tool: a killed worker is noticed when its workflow task times out.
local_registry = Registry.of(
    tools=[local_slow_append], providers={"scripted": FakeLLMProvider(responder=calling("local_slow_append", 4))}
)


def adder(request: LLMRequest) -> LLMResponse:
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not results:
        return call(("c1", "add", {"a": 20, "b": 22}))
    return say(f"the answer is {results[0].output}")


#: For `noeta run --registry`: a stateless "default" provider that uses the add tool once.
cli_registry = Registry.of(tools=[add], providers={"default": FakeLLMProvider(responder=adder)})


def _chat_registry(name: str) -> Registry:
    """A registry whose one provider, ``name``, streams from the test's chat server
    (``$NOETA_TEST_CHAT_URL``) through the OpenAI adapter."""
    import os

    from noeta.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=os.environ["NOETA_TEST_CHAT_URL"], api_key="sk-test", model="gpt-test", name=name)
    return Registry.of(providers={name: provider})


def streaming_registry() -> Registry:
    """For a worker process streaming from the test's chat server, registered as "openai-stream"."""
    return _chat_registry("openai-stream")


def anthropic_named_registry() -> Registry:
    """As :func:`streaming_registry`, the provider registered as "anthropic" (what docs/streaming.md's
    example names: the example runs as written against the test's chat server)."""
    return _chat_registry("anthropic")


def _other(request: LLMRequest) -> LLMResponse:
    return say("answered by the other worker")


#: A worker on the shared task queue with a different "default" provider (`noeta run` must not race it).
other_registry = Registry.of(tools=[add], providers={"default": FakeLLMProvider(responder=_other)})


def terminal_registry() -> Registry:
    """For `noeta run` on a terminal: the "default" provider streams from the test's chat server
    (``$NOETA_TEST_CHAT_URL``)."""
    return _chat_registry("default")


@tool(name="hang_forever", version="1", input_schema={"type": "object"}, description="Blocks its thread for good.")
def hang_forever(arguments: dict, ctx: ToolContext) -> ToolResult:
    Path(os.environ["NOETA_TEST_LOG"]).write_text(f"hung {ctx.idempotency_key}\n")
    threading.Event().wait()  # never returns, as a tool stuck in blocking I/O
    return ToolResult(success=True, output="unreachable")


#: A worker whose only tool hangs its thread forever (the worker must still stop on SIGTERM).
hang_registry = Registry.of(
    tools=[hang_forever],
    providers={"hanging": FakeLLMProvider(responder=lambda r: call(("h", "hang_forever", {})))},
)


def _slow_local_answer(request: LLMRequest) -> LLMResponse:
    """Logs the call's start to $NOETA_TEST_LOG, then answers after 3 s (a model call long enough
    to kill its worker in)."""
    import time

    log = Path(os.environ["NOETA_TEST_LOG"])
    with log.open("a") as out:
        out.write(f"start pid={os.getpid()}\n")
    time.sleep(3)
    with log.open("a") as out:
        out.write(f"done pid={os.getpid()}\n")
    return say(f"answered {request.messages[0].text}")


#: A provider whose calls the test runs as local activities (``model_local_activity``).
slow_model_registry = Registry.of(providers={"scripted": FakeLLMProvider(responder=_slow_local_answer)})
