"""Cancelling a task while its tool runs, for each way a tool can run (an activity, a local one)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import TaskCancelledError
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.scripts import call


async def cancel_during_a_tool(client: AsyncClient, serve: Any, task_queue: str, seconds: float, **declared: Any) -> None:
    """Start a task whose tool (``@tool(**declared)``) sleeps ``seconds``, cancel the task while the
    tool runs: the task ends TaskCancelled, and the tool saw the cancellation."""
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool(name="pause", version="1", input_schema={"type": "object"}, **declared)
    async def pause(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        started.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return ToolResult(success=True, output="never")

    provider = FakeLLMProvider(responses=[call(("c1", "pause", {}))])
    async with serve(tools=[pause], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[pause]), task_queue=task_queue)
        await asyncio.wait_for(started.wait(), 20)
        await client.cancel(task_id)
        with pytest.raises(TaskCancelledError):
            await client.result(task_id)
        await asyncio.wait_for(cancelled.wait(), 20)
    assert (await client.events(task_id))[-1].type == "TaskCancelled"
