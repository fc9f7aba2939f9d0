"""The console's "fork from here" in a real headless Chromium: on a finished task's page each
model turn offers it; forking turn 3 with another provider opens the fork, which completes with
that provider's answer without running the earlier tool calls again."""

from __future__ import annotations

from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from tests.support import recorded
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in  # noqa: F401 (the browser fixture)
from tests.support.recorded import count
from tests.support.scripts import say
from tests.test_export_replay import run_counting_task

KEY = "fork-key-" + "d8" * 16


async def test_fork_from_here_on_a_model_turn(client: AsyncClient, serve, task_queue, browser, tmp_path: Path):  # noqa: F811
    source = await run_counting_task(client, serve, task_queue)
    runs_before = len(recorded.RUNS)
    other = FakeLLMProvider(responses=[say("forked from the console")])
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, serve(tools=[count], providers={"other": other}):
        async with signed_in(browser, f"{base_url}/#/tasks/{source}", KEY, tmp_path, first="source") as pages:
            page = pages.page
            # Every model turn offers the action, on its completed call.
            await page.wait_for_selector("[data-testid=events] li[data-type=TaskCompleted]", timeout=WAIT_MS)
            turns = await page.eval_on_selector_all(
                "[data-testid=events] li[data-type=ProviderCallCompleted] [data-testid=fork-turn]",
                "els => els.map(e => e.dataset.turn)",
            )
            assert turns == ["1", "2", "3", "4"]
            line = page.locator("[data-testid=events] li:has([data-testid=fork-turn][data-turn='3'])")
            await line.locator("[data-testid=fork-turn]").click()
            await line.locator("[data-testid=fork-provider]").fill("other")
            await line.locator("[data-testid=fork-system-prompt]").fill("Count no further.")
            await pages.snap("fork-form")
            await line.locator("[data-testid=fork-submit]").click()
            # The console opens the fork: it completes with the other provider's answer.
            await page.wait_for_function(
                f"() => location.hash.startsWith('#/tasks/') && !location.hash.endsWith({source!r})", timeout=WAIT_MS
            )
            fork = page.url.split("#/tasks/")[1]
            await page.wait_for_selector("[data-testid=answer]:has-text('forked from the console')", timeout=WAIT_MS)
            link = page.locator("[data-testid=forked-from]")
            await link.wait_for(timeout=WAIT_MS)
            assert f"from {source} at turn 3" in await link.inner_text()
            await pages.snap("fork")
    assert (await client.result(fork)).answer == "forked from the console"
    (request,) = other.received_requests
    assert request.system == "Count no further."
    assert len(recorded.RUNS) == runs_before  # the first two counts came from the record
    assert [e.type for e in await client.events(fork)][0] == "TaskForked"
