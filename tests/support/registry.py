"""A registry for worker subprocesses (``noeta worker --registry tests.support.registry:registry``).

Its provider is stateless, answering from the request alone, so any worker process gives the same
answer: ask for ``slow_append`` once, then report the tool's output.
"""

from __future__ import annotations

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry
from tests.support.scripts import call, say
from tests.support.tools import add, slow_append


def scripted(request: LLMRequest) -> LLMResponse:
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not results:
        return call(("c1", "slow_append", {"seconds": 4, "text": request.messages[0].text}))
    return say(f"done: {results[0].output}")


registry = Registry.of(tools=[slow_append, add], providers={"scripted": FakeLLMProvider(responder=scripted)})


def adder(request: LLMRequest) -> LLMResponse:
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not results:
        return call(("c1", "add", {"a": 20, "b": 22}))
    return say(f"the answer is {results[0].output}")


#: For `noeta run --registry`: a stateless "default" provider that uses the add tool once.
cli_registry = Registry.of(tools=[add], providers={"default": FakeLLMProvider(responder=adder)})
