"""The registry of the scale-out test's workers: a tool that answers with the worker's pid, and a
stateless provider (any worker continues any task) that calls it ``STEPS`` times."""

from __future__ import annotations

import asyncio
import os

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry
from tests.support.scripts import call, say

STEPS = 3


@tool(name="which_worker", version="1", input_schema={"type": "object"}, description="The worker's pid.")
async def which_worker(arguments: dict, ctx: ToolContext) -> ToolResult:
    await asyncio.sleep(0.2)  # long enough for several tasks to be in flight at once
    return ToolResult(success=True, output=str(os.getpid()))


def steps(request: LLMRequest) -> LLMResponse:
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock))
    return call((f"w{done}", "which_worker", {})) if done < STEPS else say("done")


registry = Registry.of(tools=[which_worker], providers={"scripted": FakeLLMProvider(responder=steps)})
