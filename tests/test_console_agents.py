"""The console with an agent catalog (NOETA_AGENTS), in a real headless Chromium: its start form
offers the catalog's agents, a task started as ``triage@1`` runs that version, and the task's page
and the task list show its agent version."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from noeta.client.client import AsyncClient
from noeta.client.host import HostConfig
from noeta.http import create_app
from noeta.security.http_guard import GuardConfig
from tests.support.agents import provider
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in  # noqa: F401 (the browser fixture)

pytestmark = pytest.mark.server

KEY = "agents-key-" + "a7" * 16


async def test_the_start_form_picks_an_agent_and_the_task_shows_its_version(
    settings, content_store, serve, task_queue, browser, tmp_path: Path  # noqa: F811
):
    host = HostConfig(settings=settings.model_copy(update={"agents": "tests.support.agents:agents"}), content_store=content_store)
    client = await AsyncClient.connect(host)
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    try:
        async with serving(app) as base_url, serve(providers=[provider]):
            async with signed_in(browser, base_url + "/", KEY, tmp_path) as pages:
                page = pages.page
                await pages.visit("new-task", base_url + "/#/new")
                picker = page.locator("[data-testid=new-agent]")
                await page.wait_for_selector("[data-testid=new-agent] option[value='triage@1']", state="attached", timeout=WAIT_MS)
                assert await picker.is_visible()
                assert "triage (current 2)" in await picker.inner_text()
                await picker.select_option("triage@1")
                await page.fill("[data-testid=new-goal]", "ticket 11")
                await page.fill("[data-testid=new-queue]", task_queue)
                await page.click("[data-testid=start]")
                await page.wait_for_url("**/#/tasks/*", timeout=WAIT_MS)
                task_id = page.url.split("#/tasks/")[1]
                await page.wait_for_selector("[data-testid=answer]:has-text('a thorough answer to ticket 11')", timeout=WAIT_MS)
                await page.wait_for_selector("[data-testid=agent-version]:has-text('triage@1')", timeout=WAIT_MS)
                await pages.snap("task-page")

                await pages.visit("task-list", base_url + "/#/?metadata=" + quote("agent=triage@1"))
                await page.wait_for_selector(
                    f"tr[data-task='{task_id}'] [data-testid=agent-version]:has-text('triage@1')", timeout=WAIT_MS
                )
    finally:
        await client.close()
