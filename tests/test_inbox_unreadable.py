"""The approvals inbox over HTTP and in the console names the waiting task it cannot read: two plain
tasks wait for a human beside one encrypted with a key ``noeta serve`` lacks; ``GET /approvals``
lists the two and names the third with its error, and the console's inbox (headless Chromium)
shows the two approval cards and a line for the third."""

from __future__ import annotations

from pathlib import Path

import httpx

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.http import create_app
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from noeta.security.keys import new_key_entry
from noeta.worker import Registry, build_worker
from tests.support.asgi import serving
from tests.support.console import WAIT_MS, browser, give_key  # noqa: F401  (browser: a fixture)
from tests.support.scripts import call
from tests.support.waiting import eventually
from tests.test_encryption import ring
from tests.test_guards import AmountGuard, wire_money
from tests.test_key_failures import host
from tests.test_operator_listings import WIRE, wiring

KEY = "inbox-key-" + "c3" * 16


async def test_the_inbox_names_the_task_it_cannot_read(
    client: AsyncClient, settings: Settings, tmp_path: Path, task_queue: str, browser  # noqa: F811
):
    secure_queue = f"{task_queue}-secure"
    async with await AsyncClient.connect(host(settings, tmp_path / "secure", ring(new_key_entry("v1")))) as secure:
        two_wires = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": a})) for a in (2000, 3000)])
        plain_registry = Registry.of(
            tools=[wire_money], providers={"FakeLLMProvider": two_wires}, content_store=client.content_store, guards=[AmountGuard()]
        )
        secure_registry = Registry.of(
            tools=[wire_money], providers={"FakeLLMProvider": wiring(4000)}, content_store=secure.content_store, guards=[AmountGuard()]
        )
        app = create_app(client, keepalive_seconds=1.0, guard=GuardConfig(api_keys=(KEY,)))
        async with serving(app) as base_url, build_worker(client.temporal, plain_registry, task_queue), \
                build_worker(secure.temporal, secure_registry, secure_queue):
            plain = [await client.start(f"pay plainly {n}", WIRE, task_queue=task_queue) for n in (1, 2)]
            sealed = await secure.start("pay secretly", WIRE, task_queue=secure_queue)
            async with httpx.AsyncClient(base_url=base_url, headers={"authorization": f"Bearer {KEY}"}, timeout=60) as http:
                body: dict = {}

                async def inbox() -> bool:
                    body.update((await http.get("/approvals", params={"limit": 1000})).json())
                    found = {p["task_id"] for p in body["waiting"]} | {u["task_id"] for u in body["unreadable"]}
                    return {*plain, sealed} <= found

                await eventually(inbox, timeout=30)
            assert set(plain) <= {p["task_id"] for p in body["waiting"]}
            assert sealed not in {p["task_id"] for p in body["waiting"]}
            [named] = [u for u in body["unreadable"] if u["task_id"] == sealed]
            assert named["error"] == "EncryptionKeyError" and "'v1'" in named["message"]

            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(base_url + "/#/approvals")
            await give_key(page, KEY)
            line = page.locator(f"[data-testid=approvals] [data-testid=unreadable][data-task='{sealed}']")
            await line.wait_for(timeout=WAIT_MS)
            assert "could not read it: EncryptionKeyError" in await line.inner_text()
            for task_id in plain:
                await page.locator(f"[data-testid=approvals] [data-task='{task_id}'] [data-testid=approval]").wait_for(timeout=WAIT_MS)
            # The header's count refreshes on its own timer: it comes to count the unreadable task too.
            await page.wait_for_function("() => Number(document.getElementById('approval-count').textContent) >= 3", timeout=WAIT_MS)
            for task_id in (*plain, sealed):
                await (secure if task_id == sealed else client).cancel(task_id)
