"""The console's message box offers what a goal does while another runs (``if_busy``): an operator
picks "interrupt it" on a busy task's page in a real headless Chromium, and the running goal ends
at once (its tool cancelled) while the new one is answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in  # noqa: F401 (the browser fixture)
from tests.test_busy_goals import Held, answer, started_tool

KEY = "if-busy-key-" + "f6" * 16


async def test_the_console_interrupts_a_busy_goal(client: AsyncClient, serve, task_queue, browser, tmp_path: Path):  # noqa: F811
    held, provider = Held(), FakeLLMProvider(responder=answer)
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, serve(tools=[held.tool()], providers=[provider]):
        task_id = await client.start("work on account A", Options(provider=provider, allowed_tools=[held.tool()]),
                                     keep_open=True, task_queue=task_queue)
        await started_tool(client, task_id)
        async with signed_in(browser, base_url + "/", KEY, tmp_path) as pages:
            page = pages.page
            await pages.visit("busy-task", f"{base_url}/#/tasks/{task_id}")
            await page.fill("[data-testid=next-goal]", "no, account B")
            await page.select_option("[data-testid=if-busy]", "interrupt")
            await pages.snap("interrupt-chosen")
            await page.click("[data-testid=send-goal]")
            await page.wait_for_selector("[data-testid=events] li[data-type=GoalInterrupted]", timeout=WAIT_MS)
            await pages.snap("interrupted")
        assert await asyncio.to_thread(held.cancelled.wait, 30)
        await client.close_task(task_id)
        final = await client.result(task_id)
    assert (final.answer, final.goal_index) == ("answer: no, account B", 1)
