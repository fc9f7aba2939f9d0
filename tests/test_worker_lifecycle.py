"""A worker's life as an operator sees it: SIGTERM lets the running tool finish (it runs once),
a SIGKILLed worker's tool is started again by the next worker within seconds (the default
heartbeat timeout), health endpoints follow the worker's state."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.protocols.task import DEFAULT_HEARTBEAT_SECONDS
from tests.support.processes import free_port, start_worker, worker_env
from tests.support.waiting import eventually


def status(port: int, path: str) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5).status_code
    except httpx.TransportError:
        return 0


@pytest.mark.slow
async def test_sigterm_lets_the_running_tool_finish_once_and_the_worker_exits_0(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path
):
    log = tmp_path / "tool.log"
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), NOETA_TEST_LOG=str(log))
    port = free_port()
    first = await asyncio.to_thread(
        start_worker, env, task_queue, "tests.support.registry:registry",
        "--shutdown-grace-seconds", "30", "--health-port", str(port),
    )
    try:
        await eventually(lambda: status(port, "/readyz") == 200)
        task_id = await client.start(
            "hello", Options(provider="scripted", allowed_tools=["slow_append"]), task_queue=task_queue
        )
        await eventually(lambda: log.exists() and "start" in log.read_text())
        first.send_signal(signal.SIGTERM)
        # Stopping: no longer ready, still alive while the 4 s tool finishes.
        await eventually(lambda: status(port, "/readyz") == 503)
        assert status(port, "/healthz") == 200
        code = await asyncio.to_thread(first.wait, 60)
        output = first.stdout.read() if first.stdout else ""
    finally:
        first.kill()
    assert code == 0, output
    assert "running tools and model calls get 30 s to finish" in output
    key = f"{task_id}/{(await client.temporal.get_workflow_handle(task_id).describe()).run_id}/1"
    assert log.read_text().splitlines() == [
        f"start {key} attempt=1 pid={first.pid}",
        f"done {key} attempt=1 pid={first.pid}",
    ]

    second = await asyncio.to_thread(start_worker, env, task_queue, "tests.support.registry:registry")
    try:
        result = await asyncio.wait_for(client.result(task_id), 60)
    finally:
        second.terminate()
        assert await asyncio.to_thread(second.wait, 30) == 0
    assert (result.status, result.answer) == ("completed", "done: appended hello")
    # The tool ran once: the second worker only made the final model call.
    assert log.read_text().splitlines() == [
        f"start {key} attempt=1 pid={first.pid}",
        f"done {key} attempt=1 pid={first.pid}",
    ]
    completed = [e for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    assert [(e.payload.call_id, e.payload.attempt) for e in completed] == [("c1", 1)]


@pytest.mark.slow
async def test_a_sigkilled_workers_tool_starts_again_within_seconds(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path
):
    """The tool declares no heartbeat_seconds: Noeta's default heartbeat timeout detects the dead
    worker (before it, the call waited for its 300 s start-to-close timeout)."""
    log = tmp_path / "tool.log"
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), NOETA_TEST_LOG=str(log))
    registry = "tests.support.registry:default_heartbeat_registry"
    first = await asyncio.to_thread(start_worker, env, task_queue, registry)
    try:
        task_id = await client.start(
            "hello", Options(provider="scripted", allowed_tools=["plain_slow_append"]), task_queue=task_queue
        )
        await eventually(lambda: log.exists() and "attempt=1" in log.read_text())
        first.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        first.wait(10)
    finally:
        first.kill()
    second = await asyncio.to_thread(start_worker, env, task_queue, registry)
    try:
        await eventually(lambda: "attempt=2" in log.read_text(), timeout=60)
        restarted_after = time.monotonic() - killed_at
        result = await asyncio.wait_for(client.result(task_id), 60)
    finally:
        second.terminate()
        second.wait(30)
    print(f"tool restarted {restarted_after:.1f} s after SIGKILL (heartbeat timeout {DEFAULT_HEARTBEAT_SECONDS:g} s)")
    assert restarted_after < 15, f"the tool was restarted only {restarted_after:.1f} s after the worker died"
    assert (result.status, result.answer) == ("completed", "done: appended hello")
    key = f"{task_id}/{(await client.temporal.get_workflow_handle(task_id).describe()).run_id}/1"
    assert log.read_text().splitlines() == [
        f"start {key} attempt=1 pid={first.pid}",
        f"start {key} attempt=2 pid={second.pid}",
        f"done {key} attempt=2 pid={second.pid}",
    ]


async def test_a_killed_workers_waiting_task_moves_on_after_the_sticky_queue_timeout(
    client: AsyncClient, settings, data_dir: Path, task_queue: str
):
    """A task between steps (waiting for its next goal) is cached by the worker that ran its last
    step, and its next step goes to that worker's own queue first. SIGKILL that worker: the step
    waits out NOETA_STICKY_QUEUE_TIMEOUT_SECONDS (temporalio's default was 10 s), then the
    second worker takes it."""
    env = worker_env(
        TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), NOETA_STICKY_QUEUE_TIMEOUT_SECONDS="2"
    )
    registry = "tests.support.registry:other_registry"  # a stateless "default" provider that answers
    first = await asyncio.to_thread(start_worker, env, task_queue, registry)
    try:
        task_id = await client.start("first", Options(provider="default"), keep_open=True, task_queue=task_queue)
        # Answered in the step that ends the goal: the task now waits for the next one, cached there.
        assert (await asyncio.wait_for(client.send_goal(task_id, "one"), 60)).answer == "answered by the other worker"
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    second = await asyncio.to_thread(start_worker, env, task_queue, registry)
    try:
        sent = time.monotonic()
        result = await asyncio.wait_for(client.send_goal(task_id, "second"), 60)
        took = time.monotonic() - sent
        await client.close_task(task_id)
        final = await asyncio.wait_for(client.result(task_id), 60)
    finally:
        second.terminate()
        second.wait(30)
    print(f"the next goal was answered {took:.1f} s after it was sent (sticky queue timeout 2 s)")
    assert result.answer == "answered by the other worker"
    assert final.status == "completed"
    # Generous for a loaded machine, and still below the 10 s the default used to cost.
    assert took < 8, f"the next goal waited {took:.1f} s for the dead worker"
