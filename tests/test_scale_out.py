"""Scale-out: several ``noeta worker`` processes on one task queue share the tasks, and when one
stops the others carry on with its work."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from tests.support.processes import start_worker, worker_env
from tests.support.scale_out import STEPS

REGISTRY = "tests.support.scale_out:registry"
OPTIONS = Options(provider="scripted", allowed_tools=["which_worker"])


async def run_tasks(client: AsyncClient, queue: str, count: int) -> list[set[int]]:
    """Start ``count`` tasks at once; for each, the pids of the workers that ran its tool calls."""
    ids = [await client.start(f"task {n}", OPTIONS, task_queue=queue) for n in range(count)]
    results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in ids)), 120)
    assert {(r.status, r.answer) for r in results} == {("completed", "done")}
    pids = []
    for task_id in ids:
        outputs = [i.output for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
        assert len(outputs) == STEPS
        pids.append({int(o) for o in outputs})
    return pids


@pytest.mark.slow
async def test_two_workers_share_a_queue_and_one_takes_over_when_the_other_stops(
    client: AsyncClient, settings, data_dir: Path, task_queue: str
):
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir))
    first, second = await asyncio.gather(
        *(asyncio.to_thread(start_worker, env, task_queue, REGISTRY) for _ in range(2))
    )
    try:
        shared = await run_tasks(client, task_queue, 12)
        assert set().union(*shared) == {first.pid, second.pid}, "both workers took tool calls"

        first.send_signal(signal.SIGTERM)  # graceful: it finishes what it runs, then exits 0
        assert await asyncio.to_thread(first.wait, 60) == 0
        after = await run_tasks(client, task_queue, 4)
        assert set().union(*after) == {second.pid}
    finally:
        for proc in (first, second):
            proc.terminate()
        for proc in (first, second):
            await asyncio.to_thread(proc.wait, 30)
