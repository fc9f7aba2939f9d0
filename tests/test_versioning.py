"""The documented procedure for changing workflow code works: a change guarded by
``workflow.patched`` replays every recorded history of the released workflow, new tasks take the
new path, and the same change made without the guard fails replay (so this test can fail)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.worker import Worker

from noeta.activities.agent import AgentActivities
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry
from noeta.workflows import AgentWorkflow
from tests.support.pure_policy import WrappedLLMPolicy
from tests.support.replay import replay
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.versioned import (
    EXAMPLE_PATCH,
    PatchedAgentWorkflow,
    PatchedBuiltinPolicyWorkflow,
    UnpatchedAgentWorkflow,
)
from tests.test_replay import HISTORIES, ROOT, load


@pytest.mark.parametrize("path", HISTORIES, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in HISTORIES])
async def test_a_patched_change_replays_the_released_histories(path: Path):
    assert await replay(load(path), PatchedAgentWorkflow, PatchedBuiltinPolicyWorkflow) is None


async def test_the_same_change_without_patched_breaks_running_tasks():
    failure = await replay(load(HISTORIES[0]), UnpatchedAgentWorkflow)
    assert failure is not None and "Nondeterminism" in type(failure).__name__ + str(failure)


async def test_new_tasks_take_the_new_path(client: AsyncClient, content_store, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("3")])
    registry = Registry.of(tools=[add], providers=[provider], content_store=content_store)
    worker = Worker(
        client.temporal, task_queue=task_queue, workflows=[PatchedAgentWorkflow],
        activities=AgentActivities(registry).activities(),
    )
    async with worker:
        # A policy of its own: the task runs as WORKFLOW_NAME, the type this worker registers.
        options = Options(provider=provider, allowed_tools=[add], policy=WrappedLLMPolicy())
        task_id = await client.start("add", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "3"
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    markers = [e.marker_recorded_event_attributes for e in history.events if e.HasField("marker_recorded_event_attributes")]
    patches = [m for m in markers if m.marker_name == "core_patch" and EXAMPLE_PATCH in str(m.details)]
    assert len(patches) == 1
    assert any(e.HasField("timer_started_event_attributes") for e in history.events)
    # The new history replays with the patched code, and not with the code before the change: old
    # workers still running during a rolling deploy fail such tasks' workflow tasks until they are
    # replaced (Temporal retries them, nothing is lost).
    assert await replay(history, PatchedAgentWorkflow) is None
    assert await replay(history, AgentWorkflow) is not None
