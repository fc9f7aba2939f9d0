"""A registry for worker subprocesses whose task calls the test MCP server's ``confirm_action``
(a tool that asks the user back), then reports its output. The provider is stateless, answering
from the request alone, so any worker process answers the same."""

from __future__ import annotations

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.mcp import mcp_tool_name
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry
from tests.support.scripts import call, say


def confirming(request: LLMRequest) -> LLMResponse:
    """Call ``confirm_action`` once, then answer with its output."""
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not results:
        return call(("c1", mcp_tool_name("asker", "confirm_action"), {"action": "delete the report"}))
    return say(f"tool said: {results[0].output}")


registry = Registry.of(providers={"asking": FakeLLMProvider(responder=confirming)})
