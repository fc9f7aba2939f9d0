"""A burst of tasks beyond a provider's quota queues instead of failing.

The provider server of these tests admits ``QUOTA`` requests per fixed one-second window and
answers the rest with 429 and a ``retry-after`` to the next window, as hosted APIs do per minute
(the window is scaled down from a minute to a second to keep the test short; the property is the
same: far more tasks than one window admits, each needing the quota). Whether a loaded machine
even reaches 10 requests a second varies, so the server also refuses the first request of every
task once: each task must wait at least once, and with ``max_retries=0`` it completes only if
waits do not use up retries. ``bench/rate_limits.py`` runs the unscaled case (120 per minute).
"""

from __future__ import annotations

import asyncio

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.providers.limits import ProviderLimit
from noeta.providers.openai import OpenAIProvider
from noeta.providers.rate_windows import RedisWindows
from noeta.worker import Registry, build_worker
from tests.support.fault_server import running_fault_server
from tests.support.resources import REDIS_URL, require_redis, unique

QUOTA = 10


async def start_all(client: AsyncClient, count: int, provider: str, task_queue: str, **options) -> list[str]:
    starts = (client.start(f"task {i}", Options(provider=provider, **options), task_queue=task_queue)
              for i in range(count))
    return list(await asyncio.gather(*starts))


@pytest.mark.slow
async def test_100_tasks_against_a_quota_all_complete(client: AsyncClient, content_store, task_queue):
    with running_fault_server(quota=(QUOTA, 1.0), refuse_first=True) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="", model="m", name="quota")
        registry = Registry.of(providers=[provider], content_store=content_store)
        async with build_worker(client.temporal, registry, task_queue):
            # Ten times what one window admits (bench/rate_limits.py runs 200 against 120 a minute).
            task_ids = await start_all(client, 100, "quota", task_queue, max_retries=0)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in task_ids)), 240)
    # No retries allowed, and every task was refused at least once: the waits did not count.
    assert [r.status for r in results] == ["completed"] * 100
    assert server.served(200) == 100
    assert server.served(429) >= 100


@pytest.mark.slow
async def test_a_worker_limit_keeps_calls_under_the_quota(client: AsyncClient, content_store, task_queue):
    with running_fault_server(quota=(10, 1.0)) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="", model="m", name="limited")
        limit = ProviderLimit(requests=8, per_seconds=1.0)  # a little under the quota
        registry = Registry.of(providers=[provider], content_store=content_store, provider_limits={"limited": limit})
        async with build_worker(client.temporal, registry, task_queue):
            task_ids = await start_all(client, 40, "limited", task_queue)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in task_ids)), 120)
    assert [r.status for r in results] == ["completed"] * 40
    assert (server.served(200), server.served(429)) == (40, 0)


@pytest.mark.slow
async def test_a_limit_from_the_environment_keeps_calls_under_the_quota(
    client: AsyncClient, content_store, task_queue, monkeypatch
):
    # As `noeta worker` deploys it: no limit in the registry, NOETA_PROVIDER_LIMITS in the environment.
    monkeypatch.setenv("NOETA_PROVIDER_LIMITS", "from_env=8/1")
    with running_fault_server(quota=(10, 1.0)) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="", model="m", name="from_env")
        registry = Registry.of(providers=[provider], content_store=content_store)
        async with build_worker(client.temporal, registry, task_queue):
            task_ids = await start_all(client, 40, "from_env", task_queue)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in task_ids)), 120)
    assert [r.status for r in results] == ["completed"] * 40
    assert (server.served(200), server.served(429)) == (40, 0)


class CountedRedisWindows(RedisWindows):
    """Redis counts that also count the starts granted through this worker."""

    granted = 0

    async def reserve(self, provider, requests, per_seconds, max_wait):
        reservation = await super().reserve(provider, requests, per_seconds, max_wait)
        self.granted += reservation.granted
        return reservation


@pytest.mark.slow
async def test_a_quota_announced_as_spent_is_waited_out_not_hammered(client: AsyncClient, content_store, task_queue):
    # One call at a time, no limit of the worker's own: only the provider's headers
    # (x-ratelimit-remaining-requests: 0 and its reset) can keep the 4th call of a window from
    # being sent into a 429.
    with running_fault_server(quota=(3, 1.0), rate_headers=True) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="", model="m", name="announced")
        limit = ProviderLimit(max_concurrent=1)
        registry = Registry.of(providers=[provider], content_store=content_store, provider_limits={"announced": limit})
        async with build_worker(client.temporal, registry, task_queue):
            task_ids = await start_all(client, 8, "announced", task_queue, max_retries=0)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in task_ids)), 120)
    assert [r.status for r in results] == ["completed"] * 8
    assert (server.served(200), server.served(429)) == (8, 0)


@pytest.mark.slow
async def test_a_limit_counted_in_redis_holds_for_two_workers_together(client: AsyncClient, host, content_store, task_queue):
    # Each worker alone would send up to 5 a second, the two together 10: over the quota of 8.
    # Counted in Redis, the fleet sends 5. (The quota leaves room above 5: the server counts calls
    # as they arrive in its fixed windows, and on a loaded machine a call reserved at the end of
    # one second can arrive in the next.)
    require_redis()
    prefix = unique("rate") + ":"
    with running_fault_server(quota=(8, 1.0)) as server:
        def registry() -> Registry:
            provider = OpenAIProvider(base_url=server.base_url, api_key="", model="m", name="fleet")
            made = Registry.of(providers=[provider], content_store=content_store,
                               provider_limits={"fleet": ProviderLimit(requests=5, per_seconds=1.0)})
            made.rate_limits = CountedRedisWindows(REDIS_URL, prefix=prefix)
            return made

        first, second = registry(), registry()
        # Two workers need two connections (one per worker process in a fleet), neither of them the
        # starting client's: a worker on the client that starts a task takes it eagerly, and with it
        # every activity the task dispatches eagerly.
        async with await AsyncClient.connect(host) as one, await AsyncClient.connect(host) as other, \
                build_worker(one.temporal, first, task_queue), build_worker(other.temporal, second, task_queue):
            task_ids = await start_all(client, 30, "fleet", task_queue, max_retries=0)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in task_ids)), 120)
        for made in (first, second):
            await made.rate_limits.aclose()
    assert [r.status for r in results] == ["completed"] * 30
    assert (server.served(200), server.served(429)) == (30, 0)
    # Both workers called the provider.
    assert first.rate_limits.granted > 0 and second.rate_limits.granted > 0
