"""What an approver's edit looks like everywhere, in a real headless Chromium: a refund proposed at
250 is cut to 200 in the approvals inbox; the task page's tool-call table and conversation,
``messages()`` and ``noeta messages`` all show 200 as what ran and 250 as what was proposed. The
pages an operator reads (the list, a fork, a waiting task, the edited call) are written to
docs/screenshots/ at 1280 and 1600 px when NOETA_SCREENSHOTS is set."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolUse
from noeta.client.options import Options
from noeta.http import create_app
from noeta.protocols.hooks import ProposedToolCall, VerdictResult
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.security.http_guard import GuardConfig
from tests.support.asgi import serving
from tests.support.console import CHROMIUM, WAIT_MS, give_key, playwright_api
from tests.support.scripts import call, say
from tests.support.waiting import eventually

KEY = "truth-key-" + "f6" * 16
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
refunded: list[int] = []


@tool(name="issue_refund", version="1", risk_level="high",
      input_schema={"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]})
def issue_refund(arguments, ctx):
    refunded.append(arguments["amount"])
    return ToolResult(success=True, output=f"refunded {arguments['amount']}")


@dataclass(frozen=True)
class RefundGuard:
    """Refunds over 100 need a human."""

    name: str = "refunds"

    def check(self, action, ctx) -> VerdictResult:
        if isinstance(action, ProposedToolCall) and action.arguments.get("amount", 0) > 100:
            return VerdictResult("ask", f"a refund of {action.arguments['amount']} needs a human")
        return VerdictResult("allow")


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


def responder(request) -> Any:
    """Each task by its goal: the refund asks for 250 then reports what ran; the others wait or answer."""
    goal = request.messages[0].content[0].text
    ran = [b for m in request.messages if m.role == "tool" for b in m.content]
    if "Refund" in goal:
        return say(f"Done: {ran[0].output}.") if ran else call(("c1", "issue_refund", {"amount": 250}))
    if "Waiting" in goal:
        return call(("c1", "issue_refund", {"amount": 900}))
    return say("Refund reviewed again from the fork.")


async def snap(page: Any, name: str) -> None:
    """Screenshots at both widths (written only when asked: they are committed files)."""
    if not os.environ.get("NOETA_SCREENSHOTS"):
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 1600):
        await page.set_viewport_size({"width": width, "height": 900})
        await asyncio.sleep(0.3)
        await page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=False)
    await page.set_viewport_size({"width": 1280, "height": 900})


async def test_an_edited_approval_shows_what_ran_everywhere(
    client: AsyncClient, serve, task_queue: str, chromium, capsys, settings, data_dir: Path, monkeypatch
):
    refunded.clear()
    provider = FakeLLMProvider(responder=responder)
    options = Options(provider="FakeLLMProvider", allowed_tools=["issue_refund"], guards=["refunds"], model="gpt-test-mini")
    app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
    async with serving(app) as base_url, serve(tools=[issue_refund], providers=[provider], guards=[RefundGuard()]):
        task_id = await client.start("Refund order 1042 (damaged in transit)", options, task_queue=task_queue)
        waiting_id = await client.start("Waiting: refund order 7 in full", options, task_queue=task_queue)
        page = await chromium.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        await page.goto(base_url + "/#/approvals")
        await give_key(page, KEY)

        # The approver cuts the refund to 200 and approves.
        card = page.locator(f"[data-testid=approvals] [data-task='{task_id}'] [data-testid=approval][data-call=c1]")
        await card.wait_for(timeout=WAIT_MS)
        assert "issue_refund(amount=250)" in await card.inner_text()
        await card.locator("[data-testid=approval-arguments]").fill('{"amount": 200}')
        await card.locator("[data-testid=approve]").click()
        assert (await client.result(task_id)).answer == "Done: refunded 200."
        assert refunded == [200]

        # The task page: the tool-call table and the conversation show what ran, and what was proposed.
        await page.goto(f"{base_url}/#/tasks/{task_id}")
        row = page.locator("[data-testid=tool-calls] tr[data-call=c1]")
        await row.locator("[data-testid=edited]").wait_for(timeout=WAIT_MS)
        assert await row.locator("[data-testid=ran]").inner_text() == "issue_refund(amount=200)"
        assert await row.locator("[data-testid=proposed]").inner_text() == "issue_refund(amount=250)"
        said = page.locator("[data-testid=conversation] [data-call=c1]")
        await said.locator("[data-testid=edited]").wait_for(timeout=WAIT_MS)
        assert await said.locator("[data-testid=ran]").inner_text() == "issue_refund(amount=200)"
        assert await said.locator("[data-testid=proposed]").inner_text() == "issue_refund(amount=250)"
        assert await page.locator("[data-testid=task-meta] [data-testid=status]").inner_text() == "completed"
        await snap(page, "edited-call")

        # messages() and `noeta messages` say the same.
        [use] = [i for i in await client.messages(task_id) if isinstance(i, ToolUse)]
        assert (use.arguments, use.proposed_arguments) == ({"amount": 200}, {"amount": 250})
        from noeta.cli import run

        monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
        monkeypatch.setenv("NOETA_HOME", str(data_dir))
        capsys.readouterr()
        assert await asyncio.to_thread(run, ["messages", task_id]) == 0
        [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tool call")]
        assert line == ('tool call │ issue_refund({"amount": 200}) [c1] · edited by the approver, '
                        'proposed issue_refund({"amount": 250})')

        # A fork from the completed task's second turn, marked in the list with a link to its source.
        async with httpx.AsyncClient(base_url=base_url, headers={"authorization": f"Bearer {KEY}"}, timeout=60) as http:
            made = await http.post(f"/tasks/{task_id}/fork", json={"at_turn": 2})
            assert made.status_code == 201, made.text
        fork_id = made.json()["task_id"]
        await client.result(fork_id)
        await page.goto(f"{base_url}/#/tasks/{fork_id}")
        await page.locator("[data-testid=task-meta] [data-testid=fork-of] a").wait_for(timeout=WAIT_MS)
        assert await page.locator("[data-testid=task-meta] [data-testid=fork-of] a").inner_text() == task_id
        await page.wait_for_selector("[data-testid=conversation] .msg", timeout=WAIT_MS)
        assert "? →" not in await page.locator("[data-testid=conversation]").inner_text()
        await snap(page, "fork")

        # The list: the fork marked, the waiting task in words, unknown cost as "unknown".
        async def listed() -> bool:
            rows = {t.task_id: t for t in await client.list_tasks(limit=200)}
            return fork_id in rows and rows[fork_id].forked_from == task_id and rows.get(waiting_id) is not None \
                and rows[waiting_id].status == "awaiting_approval"

        await eventually(listed, timeout=30)
        await page.goto(f"{base_url}/#/")
        fork_row = page.locator(f"[data-testid=task-rows] tr[data-task='{fork_id}']")
        await fork_row.locator("[data-testid=fork-of]").wait_for(timeout=WAIT_MS)
        assert await fork_row.locator("[data-testid=fork-of] a").inner_text() == task_id
        waiting_row = page.locator(f"[data-testid=task-rows] tr[data-task='{waiting_id}']")
        await waiting_row.wait_for(timeout=WAIT_MS)
        assert await waiting_row.locator("[data-testid=status]").inner_text() == "waiting for approval"
        assert await waiting_row.locator("[data-testid=cost]").inner_text() == "unknown"  # no price for it
        await snap(page, "task-list")

        await page.goto(f"{base_url}/#/tasks/{waiting_id}")
        await page.wait_for_selector("[data-testid=task-approvals] [data-testid=approval]", timeout=WAIT_MS)
        await page.wait_for_selector("[data-testid=events] li[data-type=ApprovalRequested]", timeout=WAIT_MS)
        await snap(page, "waiting-task")
        # Event names are whole: none is broken over two lines.
        heights = await page.eval_on_selector_all(
            "[data-testid=events] .etype", "els => els.map(e => e.getClientRects().length)")
        assert heights and set(heights) == {1}
        assert errors == []
        await client.cancel(waiting_id)
