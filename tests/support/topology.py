"""The registry of the multi-host topology test's workers (``--registry tests.support.topology:registry``).

``count_step`` records each execution's start and end in a PostgreSQL table named by
``NOETA_TOPOLOGY_TABLE`` (the test reads it to prove that no finished tool ran again); the provider is
stateless, so any worker continues the task: one ``count_step`` call per step until ``STEPS``.
"""

from __future__ import annotations

import asyncio
import os

from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry
from tests.support.scripts import call, say

STEPS = 20
STEP_SECONDS = 0.5


def record(ctx: ToolContext, event: str) -> None:
    import psycopg

    table = os.environ["NOETA_TOPOLOGY_TABLE"]
    with psycopg.connect(os.environ["NOETA_TEST_POSTGRES"], autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {table} (call_key, event, attempt, pid) VALUES (%s, %s, %s, %s)",
            (ctx.idempotency_key, event, ctx.attempt, os.getpid()),
        )


@tool(
    name="count_step",
    version="1",
    input_schema={"type": "object", "properties": {"step": {"type": "integer"}}, "required": ["step"]},
    description="Count one step (takes a moment).",
)
async def count_step(arguments: dict, ctx: ToolContext) -> ToolResult:
    await asyncio.to_thread(record, ctx, "start")
    await asyncio.sleep(STEP_SECONDS)
    await asyncio.to_thread(record, ctx, "done")
    return ToolResult(success=True, output=f"step {arguments['step']} counted")


def steps(request: LLMRequest) -> LLMResponse:
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock))
    if done < STEPS:
        return call((f"c{done}", "count_step", {"step": done}))
    return say(f"counted {done} steps")


registry = Registry.of(tools=[count_step], providers={"scripted": FakeLLMProvider(responder=steps)})
