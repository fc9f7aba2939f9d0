"""A worker killed with SIGKILL mid-tool: another worker process finishes the task, and the tool's
result is recorded exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from tests.support.processes import killed_and_replaced, worker_env

REGISTRY = "tests.support.registry:registry"


@pytest.mark.slow
async def test_sigkilled_worker_is_replaced_and_tool_result_recorded_once(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path
):
    log = tmp_path / "tool.log"
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), NOETA_TEST_LOG=str(log))
    replaced = await killed_and_replaced(
        env, task_queue, REGISTRY,
        start=lambda: client.start(
            "hello", Options(provider="scripted", allowed_tools=["slow_append"]), task_queue=task_queue
        ),
        killed_when=lambda: log.exists() and "attempt=1" in log.read_text(),
        finish=client.result,
    )
    task_id, result = replaced.task_id, replaced.result

    assert (result.status, result.answer) == ("completed", "done: appended hello")
    lines = log.read_text().splitlines()
    run_id = (await client.temporal.get_workflow_handle(task_id).describe()).run_id
    key = f"{task_id}/{run_id}/1"  # engine-assigned: the run's first tool call
    assert lines == [
        f"start {key} attempt=1 pid={replaced.killed_pid}",
        f"start {key} attempt=2 pid={replaced.second_pid}",
        f"done {key} attempt=2 pid={replaced.second_pid}",
    ]
    results = [i for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
    assert results == [ToolResultView("c1", "slow_append", True, "appended hello")]
    completed = [e for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    assert [(e.payload.call_id, e.payload.attempt) for e in completed] == [("c1", 2)]
