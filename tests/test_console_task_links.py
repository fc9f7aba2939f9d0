"""The console (a real headless Chromium, as in test_console_browser) shows what an operator needs
to follow a task elsewhere: each task's end time, its cost, and a link to its page in the Temporal
UI, in the task list and on the task's page."""

from __future__ import annotations

from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.context.content_store import LocalContentStore
from noeta.http import create_app
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in  # noqa: F401 (the browser fixture)
from tests.test_telemetry import run_with_tool

UI = "http://ui.example:8233"
KEY = "links-key-" + "c7" * 16


async def test_the_console_links_each_task_to_the_temporal_ui_and_shows_end_and_cost(
    client: AsyncClient, content_store: LocalContentStore, task_queue: str, browser, tmp_path: Path  # noqa: F811
):
    task_id = await run_with_tool(client, content_store, task_queue)  # priced: $0.036
    cost = (await client.result(task_id)).usage.cost_usd
    assert cost > 0
    link = f"{UI}/namespaces/default/workflows/{task_id}"
    before, client.ui_url = client.ui_url, UI  # as NOETA_TEMPORAL_UI sets it
    try:
        app = create_app(client, guard=GuardConfig(api_keys=(KEY,)))
        async with serving(app) as base_url:
            async with signed_in(browser, base_url + "/", KEY, tmp_path, width=1400) as pages:
                page = pages.page

                # The task list: the row's end time, cost and UI link.
                await pages.visit("task-list", f"{base_url}/#/?search=add&status=completed")
                row = page.locator(f"[data-testid=task-rows] tr[data-task='{task_id}']")
                await row.wait_for(timeout=WAIT_MS)
                assert await row.locator("[data-testid=ui-link]").get_attribute("href") == link
                assert (await row.locator("[data-testid=ended]").inner_text()).strip() != ""
                await page.wait_for_selector(f"tr[data-task='{task_id}'] [data-testid=cost]:has-text('$0.0360')", timeout=WAIT_MS)

                # The task's page: the same three.
                await pages.visit("task", f"{base_url}/#/tasks/{task_id}")
                await page.wait_for_selector("[data-testid=status]:has-text('completed')", timeout=WAIT_MS)
                await page.wait_for_selector("[data-testid=ended]:has-text('ended')", timeout=WAIT_MS)
                assert await page.locator("[data-testid=cost]").inner_text() == "cost $0.0360"
                assert await page.locator("[data-testid=ui-link]").get_attribute("href") == link
                await pages.snap("task")
    finally:
        client.ui_url = before
