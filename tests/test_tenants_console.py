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
from tests.support.scripts import call, say
from tests.test_console_browser import WAIT_MS, Pages, browser  # noqa: F401 (the browser fixture)
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
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        pages = Pages(page, tmp_path)
        try:
            await pages.visit("tasks", base_url + "/")
            await page.wait_for_selector("#key-dialog[open]", timeout=WAIT_MS)
            await page.fill("#key-input", SECRET)
            await page.click("#key-save")
            await page.wait_for_selector("#key-dialog", state="hidden", timeout=WAIT_MS)

            await pages.visit("new-task", base_url + "/#/new")
            await page.fill("[data-testid=new-goal]", "Pay the invoice")
            await page.fill("input[name=provider]", "FakeLLMProvider")
            await page.fill("[data-testid=new-tools]", "wire_money")
            await page.fill("[data-testid=new-guards]", "amount")
            await page.fill("[data-testid=new-queue]", task_queue)
            await page.click("[data-testid=start]")
            await page.wait_for_url("**/#/tasks/*", timeout=WAIT_MS)
            task_id = page.url.split("#/tasks/")[1]

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
            assert errors == []
        except BaseException:
            written = await pages.write()
            print("console screenshots:", *written, sep="\n  ")
            raise
    assert runs == [{"amount": 900}]
    [approval] = [e.payload for e in await client.events(task_id) if e.type == "ApprovalGranted"]
    assert (approval.approver, approval.via, approval.reason) == ("ops-jane", "key", "split it")
    assert (approval.proposed_arguments, approval.arguments) == ({"amount": 2500}, {"amount": 900})
