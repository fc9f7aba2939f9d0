"""The console's approvals are accountable (a real headless Chromium, as in test_console_browser):
an operator signed in with a named API key edits a waiting tool call's arguments and approves it;
the task records the key's name as the approver, both argument sets, and the tool ran once with
the edited ones."""

from __future__ import annotations

from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in, start_wire_task  # noqa: F401 (the browser fixture)
from tests.support.scripts import call, say
from tests.test_guards import AmountGuard, runs, wire_money

SECRET = "jane-console-" + "f6" * 16


async def test_a_console_approval_records_the_keys_name_and_the_edit(
    client: AsyncClient, serve, task_queue, browser, tmp_path: Path  # noqa: F811
):
    runs.clear()
    keys = tmp_path / "keys"
    keys.write_text(f"{SECRET} ops-jane acme read,start,approve\n")
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("Paid 900.")])
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(keys_file=keys))
    async with serving(app) as base_url, serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        async with signed_in(browser, base_url + "/", SECRET, tmp_path) as pages:
            page = pages.page
            task_id = await start_wire_task(pages, base_url, "Pay the invoice", task_queue)

            await pages.visit("approvals", base_url + "/#/approvals")
            card = page.locator("[data-testid=approval][data-call=c1]")
            await card.wait_for(timeout=WAIT_MS)
            wait = await card.locator("[data-testid=approval-wait]").inner_text()
            assert "risk high" in wait and "waiting since" in wait and "unless answered" in wait
            await card.locator("[data-testid=approval-arguments]").fill('{"amount": 900}')
            await card.locator("[data-testid=approval-reason]").fill("split it")
            await pages.snap("editing")
            await card.locator("[data-testid=approve]").click()
            await page.wait_for_selector("[data-testid=approvals]:has-text('Nothing waits for approval')", timeout=WAIT_MS)

            await pages.visit("task-done", f"{base_url}/#/tasks/{task_id}")
            await page.wait_for_selector("[data-testid=status]:has-text('completed')", timeout=WAIT_MS)
            granted = page.locator("[data-testid=events] li[data-type=ApprovalGranted]")
            await granted.wait_for(timeout=WAIT_MS)
            assert "by ops-jane (key)" in await granted.inner_text()
            edited = page.locator("[data-testid=audit] li[data-action=edited]")
            await edited.wait_for(timeout=WAIT_MS)
            assert "ops-jane (key) [c1]" in await edited.inner_text() and '{"amount": 900}' in await edited.inner_text()
            started = await page.locator("[data-testid=audit] li[data-action=started]").inner_text()
            assert "ops-jane (key)" in started
    assert runs == [{"amount": 900}]
    [approval] = [e.payload for e in await client.events(task_id) if e.type == "ApprovalGranted"]
    assert (approval.approver, approval.via, approval.reason) == ("ops-jane", "key", "split it")
    assert (approval.proposed_arguments, approval.arguments) == ({"amount": 2500}, {"amount": 900})
