"""A worker killed with SIGKILL mid-tool: another worker process finishes the task, and the tool's
result is recorded exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]


def start_worker(env: dict[str, str], queue: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "worker.py", "--registry", "tests.support.registry:registry", "--task-queue", queue],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the worker announces itself once it polls
    assert line.startswith("noeta worker on"), line
    return proc


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
    first = await asyncio.to_thread(start_worker, env, task_queue)
    try:
        task_id = await client.start(
            "hello", Options(provider="scripted", allowed_tools=["slow_append"]), task_queue=task_queue
        )
        await eventually(lambda: log.exists() and "attempt=1" in log.read_text())
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    second = await asyncio.to_thread(start_worker, env, task_queue)
    try:
        result = await asyncio.wait_for(client.result(task_id), 60)
    finally:
        second.terminate()
        second.wait(10)

    assert (result.status, result.answer) == ("completed", "done: appended hello")
    lines = log.read_text().splitlines()
    key = f"{task_id}/c1"
    assert lines == [
        f"start {key} attempt=1 pid={first.pid}",
        f"start {key} attempt=2 pid={second.pid}",
        f"done {key} attempt=2 pid={second.pid}",
    ]
    results = [i for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
    assert results == [ToolResultView("c1", "slow_append", True, "appended hello")]
    completed = [e for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    assert [(e.payload.call_id, e.payload.attempt) for e in completed] == [("c1", 2)]
