"""A console page that closes its live streams leaves nothing in serve's log: the task page of a task
waiting for a human is opened in a real headless Chromium (its event and delta streams open) and
closed, and no asyncio error (a task destroyed while pending, an exception never retrieved) is
logged, even after the garbage collector has run."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.http import create_app
from noeta.protocols.hooks import ProposedToolCall, VerdictResult
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, give_key  # noqa: F401  (browser: a fixture)
from tests.support.scripts import call
from tests.support.waiting import eventually

KEY = "quiet-key-" + "a7" * 16


@tool(name="wire_out", version="1", risk_level="high",
      input_schema={"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]})
def wire_out(arguments, ctx):
    return ToolResult(success=True, output="sent")


class AlwaysAsk:
    """Every call needs a human: the task waits, its page keeps its streams open."""

    name = "always-ask"

    def check(self, action: Any, ctx: Any) -> VerdictResult:
        if isinstance(action, ProposedToolCall):
            return VerdictResult("ask", "a person decides")
        return VerdictResult("allow")


async def test_closing_a_task_page_logs_no_asyncio_error(
    client: AsyncClient, serve, task_queue: str, browser, caplog: pytest.LogCaptureFixture  # noqa: F811
):
    provider = FakeLLMProvider(responses=[call(("c1", "wire_out", {"amount": 5}))])
    options = Options(provider="FakeLLMProvider", allowed_tools=["wire_out"], guards=["always-ask"])
    app = create_app(client, keepalive_seconds=0.5, guard=GuardConfig(api_keys=(KEY,)))
    caplog.set_level(logging.DEBUG, logger="asyncio")
    async with serving(app) as base_url, serve(tools=[wire_out], providers=[provider], guards=[AlwaysAsk()]):
        task_id = await client.start("Wire 5 to the supplier", options, task_queue=task_queue)
        await eventually(lambda: client.pending_approvals(task_id), timeout=30)
        for _ in range(2):  # two pages (each its own browser context) opened and closed
            page = await browser.new_page()
            await page.goto(f"{base_url}/#/tasks/{task_id}")
            await give_key(page, KEY)
            await page.wait_for_selector("[data-testid=task-approvals] [data-testid=approval]", timeout=WAIT_MS)
            await asyncio.sleep(1.5)  # past a keep-alive: both streams are open and waiting
            await page.close()
            await asyncio.sleep(1.5)  # the server notices the closed connections
        gc.collect()
        await asyncio.sleep(0.5)
        await client.cancel(task_id)
    gc.collect()
    await asyncio.sleep(0.2)
    noisy = [r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]
    noisy += [r.getMessage() for r in caplog.records if r.name.startswith("noeta.http") and r.levelno >= logging.ERROR]
    assert noisy == []
