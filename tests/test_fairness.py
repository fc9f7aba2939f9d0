"""Fair share between tenants and priorities between tasks, on Temporal's own Priority (docs/fairness.md),
against the dev server the tests share (started with Noeta's dispatch config) and real workers: a
tenant's backlog does not hold another tenant's few tasks back, an urgent task overtakes a queue of
ordinary ones, and both show in the task's events and the server's description of the queue."""

from __future__ import annotations

import pytest
from temporalio.common import Priority

from noeta.client.client import AsyncClient
from noeta.client.priority import FairnessSettings, fairness_key, parse_tenant_weights, task_priority
from noeta.client.queue_limits import QueueLimits, apply_queue_limits, describe_queue, model_call_rate
from noeta.context.content_store import LocalContentStore
from noeta.errors import ConfigurationError
from noeta.providers.limits import ProviderLimit
from tests.support.noisy_neighbour import Batch, run_batches
from tests.support.waiting import eventually


def test_a_task_carries_its_priority_and_its_tenant_with_its_weight():
    weighted = FairnessSettings(tenant_weights={"acme": 2.0})
    assert task_priority(1, "acme", weighted) == Priority(priority_key=1, fairness_key="acme", fairness_weight=2.0)
    assert task_priority(None, None, weighted) == Priority(fairness_key="default")
    assert task_priority(4, "acme", FairnessSettings(fairness=False)) == Priority(priority_key=4)
    assert len(fairness_key("t" * 100).encode()) == 64


def test_tenant_weights_and_the_model_call_rate_come_from_configuration(monkeypatch: pytest.MonkeyPatch):
    assert parse_tenant_weights("acme=2, trial=0.5") == {"acme": 2.0, "trial": 0.5}
    for bad in ("acme", "acme=0", "acme=x", "acme=1,acme=2", "=1"):
        with pytest.raises(ConfigurationError, match="NOETA_TENANT_WEIGHTS"):
            parse_tenant_weights(bad)
    monkeypatch.setenv("NOETA_TENANT_WEIGHTS", "acme=3")
    monkeypatch.setenv("NOETA_FAIRNESS", "off")
    assert FairnessSettings() == FairnessSettings(fairness=False, tenant_weights={"acme": 3.0})
    limits = {"openai": ProviderLimit.per_minute(120), "anthropic": ProviderLimit(requests=10, per_seconds=10), "x": ProviderLimit()}
    assert model_call_rate(limits) == 3.0
    assert model_call_rate({"x": ProviderLimit(max_concurrent=2)}) is None


@pytest.mark.slow
async def test_a_tenants_backlog_does_not_hold_back_another_tenants_tasks(
    client: AsyncClient, content_store: LocalContentStore, task_queue: str, monkeypatch: pytest.MonkeyPatch
):
    batches = [Batch("A", "tenant-a", 60), Batch("B", "tenant-b", 5)]
    fair = await run_batches(client, content_store, task_queue, batches, steps=1)
    # Fairness on: B's five are served beside A's backlog, all done before A's 30th.
    assert fair.before_last("B", "A") < 30, fair.order
    monkeypatch.setenv("NOETA_FAIRNESS", "off")  # the same run, configured without fairness keys
    unfair = await run_batches(client, content_store, task_queue + "-off", batches, steps=1)
    assert unfair.before_last("B", "A") >= 45, unfair.order


@pytest.mark.slow
async def test_an_urgent_task_overtakes_a_queue_of_ordinary_ones(
    client: AsyncClient, content_store: LocalContentStore, task_queue: str
):
    batches = [Batch("ordinary", "default", 30, priority=3), Batch("urgent", "default", 1, priority=1)]
    seen = {}

    async def backlog() -> bool:
        seen.update((await describe_queue(client.temporal, task_queue))["workflow"]["backlog_by_priority"])
        return (seen.get(1), seen.get(3)) == (1, 30)

    async def queued() -> None:  # all started, no worker yet: the server's backlog by priority (its
        await eventually(backlog, timeout=20, interval=0.5)  # counts lag a moment behind)

    outcome = await run_batches(client, content_store, task_queue, batches, steps=1, on_queued=queued)
    assert outcome.before_last("urgent", "ordinary") < 27, outcome.order  # before 90 % of them
    assert (seen.get(1), seen.get(3)) == (1, 30), (seen, outcome.order)


async def test_priority_and_fairness_key_show_in_the_events_the_listing_and_the_queue(
    client: AsyncClient, serve, task_queue: str
):
    from tests.support.noisy_neighbour import scripted, work
    from noeta.client.options import Options

    provider = scripted(1, 0.0)
    async with serve(tools=[work], providers=[provider]):
        task_id = await client.start(
            "work", Options(provider=provider, allowed_tools=[work], priority=2), task_queue=task_queue, tenant="acme"
        )
        assert (await client.result(task_id)).status == "completed"
    created = [e.payload for e in await client.events(task_id) if e.type == "TaskCreated"]
    assert (created[0].priority, created[0].fairness_key) == (2, "acme")
    assert (await client.describe(task_id)).priority == 2
    await apply_queue_limits(client.temporal, task_queue, QueueLimits(activity_rps=50, tenant_rps=20, weights={"acme": 2}))
    described = await describe_queue(client.temporal, task_queue)
    assert described["activity"]["weights"] == {"acme": 2.0} == described["workflow"]["weights"]
    assert (described["activity"]["queue_rps"], described["activity"]["tenant_rps"]) == (50, 20)
    assert described["activity"]["effective_rps"] == 50
    await apply_queue_limits(client.temporal, task_queue, QueueLimits(activity_rps=0))
    assert (await describe_queue(client.temporal, task_queue))["activity"]["queue_rps"] is None
