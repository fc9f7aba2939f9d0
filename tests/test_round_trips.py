"""Round trips a step does not pay: the first workflow task handed over with the start (eager
workflow start) and activities handed over with the workflow task that schedules them (eager
activity dispatch), where the starter's process runs the worker."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer, free_port
from noeta.client.options import HostConfig, Options
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually


def counter(text: str, name: str, **labels: str) -> float:
    """The sum of metric ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}{{([^}}]*)}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match[1] for k, v in labels.items()):
            total += float(match[2])
    return total


@pytest.mark.server
async def test_activities_are_dispatched_with_the_workflow_task_that_schedules_them(tmp_path: Path):
    port = free_port()
    server = EmbeddedServer(tmp_path / "temporal", headless=True, extra_args=("--metrics-port", str(port))).start()
    try:
        client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=server.address, home=tmp_path)))
        provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("3")])
        registry = Registry.of(tools=[add], providers=[provider], content_store=client.content_store)
        async with build_worker(client.temporal, registry, "eager"):
            task_id = await client.start("x", Options(provider=provider, allowed_tools=[add]), task_queue="eager")
            assert (await client.result(task_id)).answer == "3"
            frontend = {"namespace": "default", "operation": "PollActivityTaskQueue", "service_name": "frontend"}

            async def metrics() -> str:
                return httpx.get(f"http://127.0.0.1:{port}/metrics").text

            async def reported() -> bool:  # the server publishes its counters about once a second
                text = await metrics()
                return (
                    counter(text, "workflow_eager_execution", taskqueue="eager") >= 1
                    and counter(text, "service_requests", operation="StartWorkflowExecution", service_name="history") >= 2
                    and counter(text, "service_requests", operation="RespondActivityTaskCompleted", service_name="frontend") >= 3
                )

            other = await client.start("y", Options(provider=provider), task_queue="no-worker-here")
            await eventually(reported)
            text = await metrics()
            # Three activities ran (two model calls, one tool) and no activity poll was answered:
            # every poll the worker sent is still open, each activity came with a workflow task.
            assert counter(text, "service_requests", namespace="default", operation="RespondActivityTaskCompleted",
                           service_name="frontend") == 3
            assert counter(text, "service_requests", **frontend) == counter(text, "service_pending_requests", **frontend)
            # The start came with its first workflow task; one to a queue no worker of this process
            # polls is an ordinary start (the SDK drops the request): that task waits for a worker.
            assert counter(text, "workflow_eager_execution", taskqueue="eager") == 1
            assert counter(text, "workflow_eager_execution", taskqueue="no-worker-here") == 0
            await client.temporal.get_workflow_handle(other).terminate()
    finally:
        server.stop()
