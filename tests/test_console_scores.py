"""Online scores in the console's task list: a task scored as it ended (``Options.scoring``) shows
the mean of its scores, an unscored one shows none (real headless Chromium, dev server)."""

from __future__ import annotations

from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.http import create_app
from noeta.sdk import aquery
from noeta.sdk.testing import OnlineScoring, scorers
from noeta.security.http_guard import GuardConfig
from tests.support import evals
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, signed_in  # noqa: F401 (the browser fixture)
from tests.support.waiting import eventually

KEY = "score-key-" + "a7" * 16


async def test_the_task_list_shows_each_tasks_online_score(settings, content_store, client: AsyncClient, browser, tmp_path: Path):  # noqa: F811
    host = HostConfig(settings=settings, content_store=content_store)
    right = scorers.answer_regex(r"code-\d+")
    provider = evals.scripted({2})
    tools = [evals.search, evals.lookup]
    sampled = Options(allowed_tools=tools, scoring=OnlineScoring([right], sample=1.0))
    scored = [await aquery(sampled, goal=f"What is the code of item {n}?", provider=provider, host=host) for n in (1, 2)]
    unscored = await aquery(Options(allowed_tools=tools), goal="What is the code of item 3?", provider=provider, host=host)

    async def indexed() -> bool:
        return [(await client.describe(r.task_id)).score for r in scored] == [1.0, 0.0]

    await eventually(indexed, timeout=30)
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, signed_in(browser, base_url + "/", KEY, tmp_path) as pages:
        page = pages.page
        shown = {}
        for result in (*scored, unscored):
            row = page.locator(f"[data-testid=task-rows] tr[data-task='{result.task_id}'] [data-testid=score]")
            await row.wait_for(timeout=WAIT_MS)
            shown[result.task_id] = await row.inner_text()
        await pages.snap("scores")
    assert [shown[r.task_id] for r in scored] == ["1.00", "0.00"] and shown[unscored.task_id] == ""
