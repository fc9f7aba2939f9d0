"""Spend quotas of `noeta serve`: a key's daily spend, summed from visibility, caps what it may
start; a task it starts gets what is left as its cost limit. Real uvicorn, dev server and worker."""

from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError
from noeta.http import create_app
from noeta.http.quotas import SpendQuotas, spent_on
from noeta.providers.pricing import ModelPrice, PriceTable
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig, key_id
from tests.support.asgi import serving
from tests.support.scripts import say
from tests.support.waiting import eventually

KEY_A = "quota-key-a-" + "a1" * 12
KEY_B = "quota-key-b-" + "b2" * 12
#: $10 / $20 per million tokens: one say() call (10 in, 5 out) costs $0.0002.
PRICES = PriceTable({"house-model": ModelPrice(input_per_mtok=10, output_per_mtok=20)})


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


async def test_a_keys_daily_quota_refuses_requests_once_spent(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=lambda request: say("ok"))
    quotas = SpendQuotas(per_key={key_id(KEY_A): 0.0003}, task_max_cost_usd=0.5)
    app = create_app(client, guard=GuardConfig(api_keys=(KEY_A, KEY_B)), quotas=quotas)
    a_id = key_id(KEY_A)

    def start(key: str, goal: str, keep_open: bool = False) -> dict:
        options = {"provider": "FakeLLMProvider", "model": "house-model"}
        return {"goal": goal, "task_queue": task_queue, "keep_open": keep_open, "options": options}

    async def spent(at_least: float) -> bool:
        return await spent_on(client, a_id, today()) >= at_least - 1e-12

    async with serve(providers=[provider]) as registry, serving(app) as base_url:
        registry.prices = PRICES
        a = httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30)
        b = httpx.AsyncClient(base_url=base_url, headers={"X-API-Key": KEY_B}, timeout=30)
        async with a, b:
            # 1. A keep-open task spends $0.0002 on its first goal.
            first = (await a.post("/tasks", json=start(KEY_A, "one", keep_open=True))).json()["task_id"]
            await eventually(lambda: spent(0.0002))
            # 2. $0.0001 is left: the next task gets it as its cost limit, and stops after one call.
            second = await a.post("/tasks", json=start(KEY_A, "two"))
            assert second.status_code == 201, second.text
            second_id = second.json()["task_id"]
            created = [e.payload for e in await client.events(second_id) if e.type == "TaskCreated"][0]
            assert created.limits.max_cost_usd == pytest.approx(0.0001)
            result = await client.result(second_id)
            assert result.usage.cost_usd == pytest.approx(0.0002)
            await eventually(lambda: spent(0.0004))
            detail = (await a.get(f"/tasks/{second_id}")).json()
            assert detail["cost_usd"] == pytest.approx(0.0002)
            listed = {t["task_id"]: t for t in (await a.get("/tasks", params={"limit": 200})).json()}
            assert listed[second_id]["cost_usd"] == pytest.approx(0.0002)

            # 3. Spent: starting or continuing a task is refused, naming the quota.
            refused = await a.post("/tasks", json=start(KEY_A, "three"))
            assert refused.status_code == 429
            body = refused.json()
            assert body["error"] == "QuotaExceededError" and body["quota"] == "daily_usd"
            assert (body["key_id"], body["allowed_usd"], body["day"]) == (a_id, 0.0003, today())
            assert body["spent_usd"] == pytest.approx(0.0004)
            assert "daily_usd quota" in body["message"]
            assert int(refused.headers["retry-after"]) > 0
            goal = await a.post(f"/tasks/{first}/goals", json={"goal": "more"})
            assert goal.status_code == 429 and goal.json()["error"] == "QuotaExceededError"

            # 4. Another key has its own account; every API task gets the per-task ceiling.
            other = await b.post("/tasks", json=start(KEY_B, "for b"))
            assert other.status_code == 201, other.text
            other_id = other.json()["task_id"]
            assert (await client.result(other_id)).answer == "ok"
            created = [e.payload for e in await client.events(other_id) if e.type == "TaskCreated"][0]
            assert created.limits.max_cost_usd == 0.5
            await a.post(f"/tasks/{first}/close")
            await client.result(first)
    # Exactly the three admitted goals reached the provider.
    assert [r.messages[0].text for r in provider.received_requests] == ["one", "two", "for b"]
    assert await spent_on(client, key_id(KEY_B), today()) == pytest.approx(0.0002)


async def test_limits_in_the_http_options_are_checked(client: AsyncClient):
    app = create_app(client, guard=GuardConfig(), quotas=SpendQuotas())
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        bad = await http.post("/tasks", json={"goal": "x", "options": {"limits": {"max_dollars": 1}}})
        assert bad.status_code == 422 and "unknown field options.limits.max_dollars" in bad.json()["message"]
        bad = await http.post("/tasks", json={"goal": "x", "options": {"limits": {"max_tool_calls": -2}}})
        assert bad.status_code == 422 and "max_tool_calls must be an int >= 0" in bad.json()["message"]
        assert (await http.get("/tasks", params={"limit": 5})).status_code == 200


def test_quotas_from_the_environment():
    quotas = SpendQuotas.from_env(
        {"NOETA_KEY_DAILY_USD": "5", "NOETA_KEY_QUOTAS": "abc=20, def=0.5", "NOETA_TASK_MAX_COST_USD": "1.25"}
    )
    assert (quotas.daily_for("abc"), quotas.daily_for("def"), quotas.daily_for("other")) == (20, 0.5, 5)
    assert quotas.task_max_cost_usd == 1.25 and quotas.active
    assert not SpendQuotas.from_env({}).active
    with pytest.raises(ConfigurationError, match="NOETA_KEY_DAILY_USD"):
        SpendQuotas.from_env({"NOETA_KEY_DAILY_USD": "lots"})
    with pytest.raises(ConfigurationError, match="NOETA_KEY_QUOTAS"):
        SpendQuotas.from_env({"NOETA_KEY_QUOTAS": "abc"})
    assert key_id(KEY_A) == key_id(KEY_A) != key_id(KEY_B) and len(key_id(KEY_A)) == 16
