"""Tools used by the tests (module level, so worker subprocesses can import them)."""

from __future__ import annotations

import os
from pathlib import Path

from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.tools import tool


@tool(
    name="add",
    version="1",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    description="Add two numbers.",
)
def add(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=str(arguments["a"] + arguments["b"]))


@tool(name="boom", version="1", input_schema={"type": "object"}, description="Always raises.")
def boom(arguments: dict, ctx: ToolContext) -> ToolResult:
    raise RuntimeError("the boom tool exploded")


@tool(
    name="big_output",
    version="1",
    input_schema={"type": "object", "properties": {"kb": {"type": "integer"}}},
    description="Return a large body.",
)
def big_output(arguments: dict, ctx: ToolContext) -> ToolResult:
    kb = int(arguments.get("kb", 5))
    line = f"{ctx.call_id}: " + "x" * 60 + "\n"
    body = (line * (kb * 1024 // len(line) + 1))[: kb * 1024]
    return ToolResult(success=True, output=body)


@tool(
    name="slow_append",
    version="1",
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "text": {"type": "string"}},
        "required": ["seconds", "text"],
    },
    description="Sleep, then append a line to $NOETA_TEST_LOG; returns the text.",
    heartbeat_seconds=2,
    timeout_seconds=60,
)
async def slow_append(arguments: dict, ctx: ToolContext) -> ToolResult:
    log = Path(os.environ["NOETA_TEST_LOG"])
    with log.open("a") as f:
        f.write(f"start {ctx.idempotency_key} attempt={ctx.attempt} pid={os.getpid()}\n")
    import asyncio

    await asyncio.sleep(float(arguments["seconds"]))
    with log.open("a") as f:
        f.write(f"done {ctx.idempotency_key} attempt={ctx.attempt} pid={os.getpid()}\n")
    return ToolResult(success=True, output=f"appended {arguments['text']}")




@tool(
    name="plain_slow_append",
    version="1",
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "text": {"type": "string"}},
        "required": ["seconds", "text"],
    },
    description="slow_append with Noeta's default heartbeat and timeout (no heartbeat_seconds).",
)
async def plain_slow_append(arguments: dict, ctx: ToolContext) -> ToolResult:
    return await slow_append.invoke(arguments, ctx)


@tool(
    name="local_slow_append",
    version="1",
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "text": {"type": "string"}},
        "required": ["seconds", "text"],
    },
    description="slow_append as a local tool (a local activity, no heartbeat).",
    timeout_seconds=20,
    local=True,
)
async def local_slow_append(arguments: dict, ctx: ToolContext) -> ToolResult:
    return await slow_append.invoke(arguments, ctx)
