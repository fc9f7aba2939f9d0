"""NoetaPlugin: the converter, sandbox pass-through and worker wiring that clients and workers share."""

from __future__ import annotations

import pytest
from temporalio.client import Client as TemporalClient
from temporalio.worker import Worker

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.temporal.converter import NoetaPayloadConverter, data_converter, type_adapter
from noeta.errors import ConfigurationError
from noeta.worker.plugin import NoetaPlugin, NoetaWorkerPlugin
from noeta.protocols.decisions import CallModel, Finish
from noeta.protocols.messages import Usage
from noeta.protocols.task import TaskResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.scripts import say
from tests.support.sdk_policy import IdentityPolicy, LazyNamePolicy


async def test_workflow_instances_share_the_workers_noeta_modules(client: AsyncClient, serve, task_queue):
    # A policy importing noeta.sdk loads inside the sandbox, and sees the very class objects of the
    # worker process: the sandbox passed noeta through instead of importing a copy per task.
    async with serve(providers=[FakeLLMProvider(responses=[])]):
        answers = []
        for _ in range(3):
            task_id = await client.start("who are you", Options(policy=IdentityPolicy()), task_queue=task_queue)
            result = await client.result(task_id)
            assert result.status == "completed", result.answer
            answers.append(result.answer)
    assert answers == [f"{id(CallModel)} {id(Finish)}"] * 3


async def test_a_name_the_sdk_loads_on_first_use_is_the_workers_own_inside_the_sandbox(
    client: AsyncClient, serve, task_queue
):
    # noeta.sdk imports most names on first use; from a sandboxed policy that import must still be
    # passed through (one module per process), not a copy made inside the sandbox.
    from noeta.resources.instrument import ObservedCall

    async with serve(providers=[FakeLLMProvider(responses=[])]):
        task_id = await client.start("lazy", Options(policy=LazyNamePolicy()), task_queue=task_queue)
        result = await client.result(task_id)
    assert result.status == "completed", result.answer
    assert result.answer == str(id(ObservedCall))


def test_type_adapters_are_shared_across_converter_instances():
    # The sandbox builds a payload converter per workflow instance; the schema cache must outlive it.
    before = type_adapter.cache_info()
    payload = NoetaPayloadConverter().to_payloads([TaskResult(answer="x", status="completed", usage=Usage(), turns=0)])
    for _ in range(5):
        assert NoetaPayloadConverter().from_payloads(payload, [TaskResult])[0].answer == "x"
    after = type_adapter.cache_info()
    assert after.hits - before.hits >= 4
    assert after.currsize - before.currsize <= 1


async def test_a_plain_temporal_client_and_worker_run_a_task_with_the_plugins(client: AsyncClient, content_store, task_queue):
    # Noeta added to an application's own Temporal client and worker: one plugin each.
    temporal = await TemporalClient.connect(client.temporal.service_client.config.target_host, plugins=[NoetaPlugin()])
    provider = FakeLLMProvider(responses=[say("hello from a plain worker")])
    registry = Registry.of(providers=[provider], content_store=content_store)
    async with Worker(temporal, task_queue=task_queue, plugins=[NoetaWorkerPlugin(registry)]):
        task_id = await client.start("hi", Options(provider=provider), task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "hello from a plain worker")


async def test_build_worker_refuses_a_client_without_noetas_converter(client: AsyncClient, content_store):
    temporal = await TemporalClient.connect(client.temporal.service_client.config.target_host)
    with pytest.raises(ConfigurationError, match="NoetaPlugin"):
        build_worker(temporal, Registry.of(content_store=content_store), "never-polled")


def test_codec_is_applied_to_the_converter():
    class Marker:  # any PayloadCodec-shaped object is carried as given
        pass

    codec = Marker()
    assert data_converter(codec).payload_codec is codec  # type: ignore[arg-type]


def test_a_worker_builds_the_payload_serializers_before_its_first_workflow_task(tmp_path):
    """Built on first use, they cost the first workflow task seconds on a loaded machine, inside
    its activation, where Temporal's deadlock detector fails it after 2 s."""
    from noeta.protocols.activity_io import CallModelInput, InvokeToolInput, PrepareInput
    from noeta.protocols.task import TaskInput
    from noeta.context.content_store import LocalContentStore
    from noeta.temporal.converter import compact_serializer

    compact_serializer.cache_clear()
    NoetaWorkerPlugin(Registry.of(content_store=LocalContentStore(tmp_path)))
    before = compact_serializer.cache_info()
    for cls in (TaskInput, TaskResult, PrepareInput, CallModelInput, InvokeToolInput):
        compact_serializer(cls)
    after = compact_serializer.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + 5)
