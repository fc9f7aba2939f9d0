"""A worker killed with SIGKILL mid-tool: another worker process finishes the task, and the tool's
result is recorded exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from tests.support.processes import ROOT, start_worker
from tests.support.waiting import eventually

REGISTRY = "tests.support.registry:registry"


@pytest.mark.slow
async def test_sigkilled_worker_is_replaced_and_tool_result_recorded_once(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path
):
    log = tmp_path / "tool.log"
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_TEST_LOG": str(log),
        "PYTHONPATH": str(ROOT),
    }
    first = await asyncio.to_thread(start_worker, env, task_queue, REGISTRY)
    try:
        task_id = await client.start(
            "hello", Options(provider="scripted", allowed_tools=["slow_append"]), task_queue=task_queue
        )
        await eventually(lambda: log.exists() and "attempt=1" in log.read_text())
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    second = await asyncio.to_thread(start_worker, env, task_queue, REGISTRY)
    try:
        result = await asyncio.wait_for(client.result(task_id), 60)
    finally:
        second.terminate()
        second.wait(10)

    assert (result.status, result.answer) == ("completed", "done: appended hello")
    lines = log.read_text().splitlines()
    run_id = (await client.temporal.get_workflow_handle(task_id).describe()).run_id
    key = f"{task_id}/{run_id}/1"  # engine-assigned: the run's first tool call
    assert lines == [
        f"start {key} attempt=1 pid={first.pid}",
        f"start {key} attempt=2 pid={second.pid}",
        f"done {key} attempt=2 pid={second.pid}",
    ]
    results = [i for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
    assert results == [ToolResultView("c1", "slow_append", True, "appended hello")]
    completed = [e for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    assert [(e.payload.call_id, e.payload.attempt) for e in completed] == [("c1", 2)]
