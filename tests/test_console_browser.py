"""The web console in a real headless Chromium (Debian's ``chromium`` driven by Playwright): an
operator enters the API key, starts a task, watches its events arrive live, approves one pending
call and denies another from the approvals inbox, and sees the task complete. On failure a
screenshot of every page visited is written under the test's temp dir."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in, start_wire_task  # noqa: F401 (the browser fixture)
from tests.support.scripts import call, say
from tests.test_guards import AmountGuard, runs, wire_money

KEY = "browser-key-" + "e5" * 16
WRONG_KEY = "wrong-key-" + "0" * 16


async def task_list_loaded(page) -> None:
    """The task list has answered: rows, or the note that none match (an empty list's body has no
    height, so waiting for it to be visible fails whenever the namespace holds no tasks)."""
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=task-rows] tr')"
        " || document.body.innerText.includes('No tasks match.')",
        timeout=WAIT_MS,
    )


async def type_the_right_key_after_a_wrong_one(page, base_url: str) -> None:
    """Open the console, give it WRONG_KEY (refused), then type KEY into the dialog, unsent."""
    await page.goto(base_url + "/")
    await page.wait_for_selector("#key-dialog[open]", timeout=WAIT_MS)
    await page.fill("#key-input", WRONG_KEY)
    await page.click("#key-save")
    await page.wait_for_selector("#key-error:has-text('refused')", timeout=WAIT_MS)
    await page.fill("#key-input", KEY)


async def test_operator_starts_watches_approves_and_sees_completion(
    client: AsyncClient, serve, task_queue, browser, tmp_path: Path  # noqa: F811
):
    runs.clear()
    provider = FakeLLMProvider(
        responses=[
            call(("c1", "wire_money", {"amount": 2500}), ("c2", "wire_money", {"amount": 9000})),
            say("Paid 2500; the 9000 wire was refused."),
        ]
    )
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        # The API needs the key: the console asks for it.
        async with signed_in(browser, base_url + "/", KEY, tmp_path) as pages:
            page = pages.page

            # Start a task from the form.
            task_id = await start_wire_task(pages, base_url, "Pay both invoices", task_queue)

            # Events arrive live while the task waits for a human.
            await page.wait_for_selector("[data-testid=events] li[data-type=ApprovalRequested]", timeout=WAIT_MS)
            await page.wait_for_selector("[data-testid=current-details]:has-text('awaiting approval')", timeout=WAIT_MS)
            await pages.snap("task-waiting")
            types = await page.eval_on_selector_all("[data-testid=events] li", "els => els.map(e => e.dataset.type)")
            assert types[:3] == ["TaskCreated", "ContextPlanComposed", "MessagesAppended"]
            assert "TaskCompleted" not in types
            assert await client.is_running(task_id)

            # The approvals inbox: approve one call, deny the other with a reason.
            await pages.visit("approvals", base_url + "/#/approvals")
            first = page.locator("[data-testid=approval][data-call=c1]")
            second = page.locator("[data-testid=approval][data-call=c2]")
            await first.wait_for(timeout=WAIT_MS)
            await second.wait_for(timeout=WAIT_MS)
            assert "wire_money(amount=2500)" in await first.inner_text()
            await first.locator("[data-testid=approve]").click()
            await first.wait_for(state="detached", timeout=WAIT_MS)
            await second.locator("[data-testid=approval-reason]").fill("over the monthly budget")
            await second.locator("[data-testid=deny]").click()
            await page.wait_for_selector("[data-testid=approvals]:has-text('Nothing waits for approval')", timeout=WAIT_MS)

            # Back on the task page: it completes, with the refusal and the answer shown.
            await pages.visit("task-done", f"{base_url}/#/tasks/{task_id}")
            await page.wait_for_selector("[data-testid=status]:has-text('completed')", timeout=WAIT_MS)
            await page.wait_for_selector("[data-testid=answer]:has-text('Paid 2500')", timeout=WAIT_MS)
            await page.wait_for_selector("[data-testid=events] li[data-type=TaskCompleted]", timeout=WAIT_MS)
            await page.wait_for_selector("[data-testid=tool-calls] tr[data-call=c2]:has-text('refused')", timeout=WAIT_MS)
            await page.wait_for_selector("[data-testid=conversation]:has-text('over the monthly budget')", timeout=WAIT_MS)
            await pages.snap("task-done")

            # The task list shows it with its goal and final status (visibility lags a moment).
            await pages.visit("task-list", base_url + "/#/?search=invoices&status=completed")
            row = page.locator(f"[data-testid=task-rows] tr[data-task='{task_id}']")
            await row.wait_for(timeout=WAIT_MS)
            await page.wait_for_selector(f"tr[data-task='{task_id}']:has-text('completed')", timeout=WAIT_MS)
            assert "Pay both invoices" in await row.inner_text()
            await pages.snap("task-list")
    assert runs == [{"amount": 2500}]
    result = await client.result(task_id)
    assert result.answer == "Paid 2500; the 9000 wire was refused."
    decided = {e.payload.call_id: e.type for e in await client.events(task_id) if e.type.startswith("Approval")}
    assert decided == {"c1": "ApprovalGranted", "c2": "ApprovalDenied"}


async def test_console_uses_the_api_key_it_is_given(client: AsyncClient, browser):  # noqa: F811
    app = create_app(client, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url:
        page = await browser.new_page()
        await type_the_right_key_after_a_wrong_one(page, base_url)
        await page.click("#key-save")
        await page.wait_for_selector("#key-dialog", state="hidden", timeout=WAIT_MS)
        await task_list_loaded(page)
        # What the page sent is what any API client sends.
        async with httpx.AsyncClient(base_url=base_url) as http:
            assert (await http.get("/tasks", headers={"authorization": f"Bearer {KEY}"})).status_code == 200
        stored = await page.evaluate("() => sessionStorage.getItem('noeta.apiKey')")
        assert stored == KEY
        assert await page.evaluate("() => localStorage.getItem('noeta.apiKey')") is None  # not remembered


@pytest.mark.parametrize("released", ["while the right key is typed", "after the right key is in"])
async def test_a_late_refusal_of_the_wrong_key_does_not_undo_the_right_one(
    client: AsyncClient, browser, released: str  # noqa: F811
):
    """A wrong key is refused by every request that carried it (the page sends two at once). The
    test holds one of those refusals and lets it arrive at a chosen moment, so the order is forced
    rather than left to the machine's speed: while the user is typing the right key (it must not
    overwrite the input), or after the right key was given (it is about the old key and must not
    reopen the dialog)."""
    held: list[object] = []
    app = create_app(client, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url:
        page = await browser.new_page()

        async def hold_the_wrong_keys_approvals(route) -> None:
            if route.request.headers.get("authorization") == f"Bearer {WRONG_KEY}":
                held.append(route)
            else:
                await route.continue_()

        async def release_the_refusal() -> None:
            assert len(held) == 1
            async with page.expect_response(lambda r: r.url.endswith("/approvals") and r.status == 401):
                await held[0].continue_()  # type: ignore[attr-defined]
            await page.evaluate("() => new Promise((done) => setTimeout(done, 100))")  # let the page handle it

        await page.route("**/approvals", hold_the_wrong_keys_approvals)
        await type_the_right_key_after_a_wrong_one(page, base_url)
        if released == "while the right key is typed":
            await release_the_refusal()
            assert await page.input_value("#key-input") == KEY
        await page.click("#key-save")
        await page.wait_for_selector("#key-dialog", state="hidden", timeout=WAIT_MS)
        await task_list_loaded(page)
        if released == "after the right key is in":
            await release_the_refusal()
        assert not await page.evaluate("() => document.getElementById('key-dialog').open")
        assert await page.evaluate("() => sessionStorage.getItem('noeta.apiKey')") == KEY


async def test_docs_page_renders_every_operation_of_the_openapi_document(client: AsyncClient, browser):  # noqa: F811
    """/docs is the console's own page over FastAPI's /openapi.json: no key, nothing fetched from
    elsewhere (its Content-Security-Policy allows this server only), one section per operation."""
    app = create_app(client, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        spec = (await http.get("/openapi.json")).json()
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        await page.goto(base_url + "/docs")
        await page.wait_for_selector("[data-operation]", timeout=WAIT_MS)
        shown = await page.eval_on_selector_all("[data-operation]", "els => els.map(e => e.dataset.operation)")
        described = [f"{method.upper()} {path}" for path, ops in spec["paths"].items() for method in ops]
        assert sorted(shown) == sorted(described)
        start = page.locator("[data-operation='POST /tasks']")
        assert "API key" in await start.inner_text() and "StartTask" in await start.inner_text()
        assert await page.locator("#schema-TaskOptions").count() == 1
        assert errors == []
