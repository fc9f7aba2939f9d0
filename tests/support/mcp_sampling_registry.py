"""A registry whose task calls the test MCP server's ``summarize`` (a tool whose server asks the
client's model, ``sampling/createMessage``), then reports its output. The provider answers the
server's request (it carries the server's system prompt) with a summary of its own."""

from __future__ import annotations

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.mcp import mcp_tool_name
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry
from tests.support.scripts import call, say

#: What the task's model answers the server's sampling request with.
SUMMARY = "quarterly numbers look fine"


def summarizing(request: LLMRequest) -> LLMResponse:
    """The server's request (its system prompt): the summary; the task: call ``summarize`` once,
    then answer with its output."""
    if request.system == "You summarize in five words.":
        return say(SUMMARY, output_tokens=7)
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not results:
        return call(("s1", mcp_tool_name("sampler", "summarize"), {"text": "the quarterly report"}))
    return say(f"tool said: {results[0].output}")


registry = Registry.of(providers={"sampling": FakeLLMProvider(responder=summarizing)})
