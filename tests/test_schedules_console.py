"""The console's schedules page in a real headless Chromium: a schedule shows its timing, next run,
state and recent runs (links to their tasks); Pause, Unpause and Run now act on it. The page's
screenshot is written to the test's folder (console-schedules.png)."""

from __future__ import annotations

from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in  # noqa: F401 (the browser fixture)
from tests.support.waiting import eventually
from tests.test_schedules import answering, new_id

KEY = "schedule-key-" + "f6" * 16


async def _runs(client: AsyncClient, schedule_id: str) -> int:
    return len((await client.describe_schedule(schedule_id)).recent_runs)


async def test_schedules_page_lists_and_controls_schedules(
    client: AsyncClient, serve, task_queue, browser, tmp_path: Path  # noqa: F811
):
    schedule_id = new_id("console")
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, serve(providers={"default": answering()}):
        await client.create_schedule(schedule_id, "Triage the support inbox", cron="0 8 * * MON-FRI",
                                     timezone="Europe/Berlin", task_queue=task_queue)
        try:
            await client.trigger_schedule(schedule_id)
            await eventually(lambda: _runs(client, schedule_id), timeout=10, interval=0.2)
            async with signed_in(browser, base_url + "/#/schedules", KEY, tmp_path, first="schedules-first") as pages:
                page = pages.page
                row = page.locator(f"tr[data-schedule='{schedule_id}']")
                await row.wait_for(timeout=WAIT_MS)
                await row.locator("[data-testid=run-link]").first.wait_for(timeout=WAIT_MS)
                assert "cron 0 8 * * MON-FRI (Europe/Berlin)" in await row.inner_text()
                assert (await row.locator("[data-testid=state]").inner_text()).strip() == "active"
                assert (await row.locator("[data-testid=next-run]").inner_text()).strip() not in ("", "—")
                await pages.snap("schedules")
                (tmp_path / "console-schedules.png").write_bytes(pages.shots["schedules"])

                await row.locator("[data-testid=pause]").click()
                await row.locator("[data-testid=state]:has-text('paused')").wait_for(timeout=WAIT_MS)
                assert (await client.describe_schedule(schedule_id)).paused
                assert (await row.locator("[data-testid=next-run]").inner_text()).strip() == "—"
                await row.locator("[data-testid=unpause]").click()
                await row.locator("[data-testid=state]:has-text('active')").wait_for(timeout=WAIT_MS)
                assert not (await client.describe_schedule(schedule_id)).paused

                await row.locator("[data-testid=trigger]").click()
                await eventually(lambda: _two(client, schedule_id), timeout=10, interval=0.2)
                await page.wait_for_function(
                    f"() => document.querySelectorAll(\"tr[data-schedule='{schedule_id}'] [data-testid=run-link]\").length >= 2",
                    timeout=WAIT_MS,
                )
                link = row.locator("[data-testid=run-link]").first
                task_id = (await link.inner_text()).strip()
                assert task_id.startswith(f"{schedule_id}-")
                await link.click()
                await page.wait_for_selector("[data-testid=events] li[data-type=TaskCreated]", timeout=WAIT_MS)
                assert task_id in await page.inner_text("main")
                scheduled = page.locator("[data-testid=scheduled-by]")
                assert schedule_id in await scheduled.inner_text()
                await pages.snap("schedule-run")
        finally:
            await client.delete_schedule(schedule_id)


async def _two(client: AsyncClient, schedule_id: str) -> bool:
    return await _runs(client, schedule_id) >= 2
