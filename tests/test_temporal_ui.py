"""The Temporal UI (2.54.1, served by the embedded dev server) is readable on its own: following the
steps of docs/inspection.md in a real headless Chromium, the workflow list shows each task's goal and
Noeta status as columns, and a task waiting for a human reads ``awaiting_approval`` (RUNNING in
Temporal's own Status column) and has a view of its own (the filter ``NoetaStatus =
"awaiting_approval"``, a link). Screenshots of the configured list and of the saved view go
to docs/screenshots/ when NOETA_SCREENSHOTS is set."""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.protocols.messages import LLMRequest, LLMResponse
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.console import WAIT_MS, browser  # noqa: F401  (browser: a fixture)
from tests.support.dev_server import SERVER_ARGS
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, wire_money

SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
WAITING = 'NoetaStatus = "awaiting_approval"'


def responder(request: LLMRequest) -> LLMResponse:
    """Each task wires what its goal says; the guard lets 10 through and sends 5000 to a human."""
    goal = request.messages[0].content[0].text
    if any(m.role == "tool" for m in request.messages):
        return say("Paid.")
    return call(("c1", "wire_money", {"amount": 5000 if "supplier" in goal else 10}))


@pytest.fixture
async def ui_server(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedServer, AsyncClient]]:
    """A dev server with its UI, and a client of it."""
    server = EmbeddedServer(tmp_path / "temporal", extra_args=SERVER_ARGS).start()
    try:
        settings = Settings(temporal_address=server.address, home=tmp_path)
        store = LocalContentStore(tmp_path / "content")
        async with await AsyncClient.connect(HostConfig(settings=settings, content_store=store)) as client:
            yield server, client
    finally:
        server.stop()


async def snap(page: Any, name: str) -> None:
    if os.environ.get("NOETA_SCREENSHOTS"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SHOTS / f"{name}.png"))


@pytest.mark.server
async def test_the_temporal_ui_list_shows_goal_and_noeta_status_and_a_waiting_view(ui_server, browser):  # noqa: F811
    server, client = ui_server
    registry = Registry.of(
        tools=[wire_money], providers={"FakeLLMProvider": FakeLLMProvider(responder=responder)},
        content_store=client.content_store, guards=[AmountGuard()],
    )
    options = Options(provider="FakeLLMProvider", allowed_tools=["wire_money"], guards=["amount"])
    async with build_worker(client.temporal, registry, "noeta"):
        paid = await client.start("Pay the courier 10 EUR for order 1042", options, task_queue="noeta")
        waiting = await client.start("Pay the supplier 5000 EUR for invoice 77", options, task_queue="noeta")
        await client.result(paid)

        async def indexed() -> bool:
            return {t.task_id: t.status for t in await client.list_tasks(limit=10)} == {
                paid: "completed", waiting: "awaiting_approval"}

        await eventually(indexed, timeout=30)
        page = await browser.new_page(viewport={"width": 1600, "height": 900})
        await page.goto(f"{server.ui_url}/namespaces/default/workflows")
        await page.wait_for_selector(f"text={waiting}", timeout=WAIT_MS)

        # docs/inspection.md, "Goal and status as columns": Configure Columns, add, remove, close.
        await page.click("[data-testid=workflows-summary-table-configuration-button]")
        for column in ("NoetaStatus", "NoetaGoal"):
            await page.click(f"[data-testid='orderable-list-item-{column}-add-button']")
        for column in ("Run ID", "Type", "End"):
            await page.click(f"[data-testid='orderable-list-item-{column}-remove-button']")
        await page.click("[data-testid=drawer-close-button]")
        await asyncio.sleep(1)  # the drawer slides away
        header = await page.locator("table thead").inner_text()
        assert "NoetaStatus" in header and "NoetaGoal" in header and "Run ID" not in header
        row = page.locator("table tbody tr", has_text=waiting)
        await row.get_by_text("awaiting_approval").wait_for(timeout=WAIT_MS)
        assert "Pay the supplier 5000 EUR for invoice 77" in await row.inner_text()
        assert "RUNNING" in (await row.inner_text()).upper()  # Temporal's own status cannot tell
        done = page.locator("table tbody tr", has_text=paid)
        assert "completed" in await done.inner_text() and "Pay the courier" in await done.inner_text()
        await snap(page, "temporal-ui-columns")

        # "Tasks waiting for a human": the filter (a link to bookmark, or to save as a view).
        await page.goto(f"{server.ui_url}/namespaces/default/workflows?query={urllib.parse.quote(WAITING)}")
        await page.locator("table tbody tr", has_text=waiting).wait_for(timeout=WAIT_MS)
        assert await page.locator("table tbody tr", has_text=paid).count() == 0
        # The columns chosen above are kept (in the browser's storage) for every view of the list.
        assert "NoetaGoal" in await page.locator("table thead").inner_text()
        assert await page.locator("table tbody tr", has_text=paid).count() == 0
        await snap(page, "temporal-ui-waiting")
        await client.cancel(waiting)
