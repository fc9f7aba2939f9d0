"""Cancelling a task while its tool or model call runs, for each way one can run (an activity, a
local one)."""

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


class Pause:
    """A wait of ``seconds`` that notes when it started and whether it was cancelled (a tool's or a
    provider's body)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

    async def run(self) -> None:
        """Wait; a cancellation is noted and goes on."""
        self.started.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def cancel_once_started(client: AsyncClient, task_id: str, pause: Pause) -> None:
    """Cancel the task once ``pause`` runs: the task ends TaskCancelled, and the pause saw the
    cancellation."""
    await asyncio.wait_for(pause.started.wait(), 20)
    await client.cancel(task_id)
    with pytest.raises(TaskCancelledError):
        await client.result(task_id)
    await asyncio.wait_for(pause.cancelled.wait(), 20)
    assert (await client.events(task_id))[-1].type == "TaskCancelled"


async def cancel_during_a_tool(client: AsyncClient, serve: Any, task_queue: str, seconds: float, **declared: Any) -> None:
    """Start a task whose tool (``@tool(**declared)``) sleeps ``seconds``, cancel the task while the
    tool runs: the task ends TaskCancelled, and the tool saw the cancellation."""
    pause_ = Pause(seconds)

    @tool(name="pause", version="1", input_schema={"type": "object"}, **declared)
    async def pause(arguments: dict[str, Any], ctx: Any) -> ToolResult:
        await pause_.run()
        return ToolResult(success=True, output="never")

    provider = FakeLLMProvider(responses=[call(("c1", "pause", {}))])
    async with serve(tools=[pause], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[pause]), task_queue=task_queue)
        await cancel_once_started(client, task_id, pause_)
