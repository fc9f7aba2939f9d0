"""Worker Deployment Versioning with real worker processes: two builds of one deployment whose
user policy decides differently. A task waiting for approval stays on its build after another
becomes current; a keep_open task moves to the current build at its next idle point; a ramp
splits new tasks; a rollback sends them back. The same change deployed without versioning fails
the waiting task's replay."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import AssistantMessage, Result, UserMessage
from noeta.client.options import Options
from noeta.client.version_report import VersionUse, worker_versions
from tests.support.processes import ROOT, start_worker, worker_env
from tests.support.rollout import build_path, policy_of
from tests.support.rollout.deployments import set_current, set_ramping, stop_ramping
from tests.support.waiting import eventually

pytestmark = [pytest.mark.server, pytest.mark.slow]

REGISTRY = "tests.support.rollout.registry:registry"


class Fleet:
    """Worker processes of one deployment, one per build."""

    def __init__(self, settings, data_dir: Path, queue: str) -> None:
        self.address = settings.temporal_address
        self.data_dir = data_dir
        self.queue = queue
        self.deployment = f"dep-{uuid.uuid4().hex[:8]}"
        self.procs: list[subprocess.Popen[str]] = []

    async def start(self, build: str) -> None:
        env = worker_env(
            TEMPORAL_ADDRESS=self.address, NOETA_HOME=str(self.data_dir),
            PYTHONPATH=f"{ROOT}:{build_path(build)}",
            NOETA_DEPLOYMENT=self.deployment, NOETA_BUILD_ID=build, NOETA_UPGRADE_CHECK_SECONDS="2",
        )
        self.procs.append(await asyncio.to_thread(start_worker, env, self.queue, REGISTRY))

    async def current(self, build: str) -> None:
        await asyncio.to_thread(set_current, self.address, self.deployment, build)

    def version(self, build: str) -> str:
        return f"{self.deployment}:{build}"

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(20)


@pytest.fixture
async def fleet(settings, data_dir: Path, task_queue: str):
    f = Fleet(settings, data_dir, task_queue)
    try:
        yield f
    finally:
        await asyncio.to_thread(f.stop)


def options(**more) -> Options:
    return Options(policy=policy_of("a"), allowed_tools=["refund"], guards=["human"], **more)


async def run_version(client: AsyncClient, task_id: str) -> str | None:
    """The deployment version the task's current run is pinned to (``deployment:build``)."""
    info = (await client.temporal.get_workflow_handle(task_id).describe()).raw_description.workflow_execution_info
    version = info.versioning_info.deployment_version
    return f"{version.deployment_name}:{version.build_id}" if version.build_id else None


async def test_a_waiting_task_stays_on_its_build_and_new_tasks_start_on_the_current_one(
    client: AsyncClient, fleet: Fleet, tmp_path: Path
):
    await fleet.start("a")
    await fleet.current("a")
    await fleet.start("b")
    waiting = await client.start("refund order 1", options(), task_queue=fleet.queue)

    async def asks() -> bool:
        return bool(await client.pending_approvals(waiting))

    await eventually(asks, timeout=30)
    history = await client.temporal.get_workflow_handle(waiting).fetch_history()

    await fleet.current("b")
    later = await client.start("refund order 2", options(), task_queue=fleet.queue)
    assert (await asyncio.wait_for(client.result(later), 30)).answer == "b: refunds need a ticket"
    # What `noeta versions` reports: a still has the waiting task (keep it), b is current.
    async def reported() -> dict[str, VersionUse]:
        return {u.version: u for u in await worker_versions(client.temporal)}

    async def a_in_use() -> bool:
        found = await reported()
        return fleet.version("a") in found and found[fleet.version("a")].running >= 1

    await eventually(a_in_use, timeout=60)
    found = await reported()
    assert found[fleet.version("b")].routing == "current" and not found[fleet.version("a")].retirable
    assert (await client.describe(waiting)).worker_version == fleet.version("a")

    (request,) = await client.pending_approvals(waiting)
    await client.approve(waiting, request.call_id, True)
    assert (await asyncio.wait_for(client.result(waiting), 30)).answer == "a: refunded 5"

    events = (await client.temporal.get_workflow_handle(waiting).fetch_history()).events
    assert not [e for e in events if e.HasField("workflow_task_failed_event_attributes")]
    assert await run_version(client, waiting) == fleet.version("a")
    assert await run_version(client, later) == fleet.version("b")

    async def a_drained() -> bool:  # no task left on a: it may be retired
        listed = {t.task_id: t.worker_version for t in await client.list_tasks(limit=100)}
        return listed.get(later) == fleet.version("b") and (await reported())[fleet.version("a")].retirable

    await eventually(a_drained, timeout=60)

    # The same change deployed without versioning: a worker of build b picks the waiting task up
    # and replays its history under the changed policy, which fails.
    path = tmp_path / "waiting.json"
    path.write_text(history.to_json())
    replayed = subprocess.run(
        [sys.executable, "-m", "tests.support.rollout.replay_under", str(path)], cwd=ROOT, capture_output=True,
        text=True, env=worker_env(PYTHONPATH=f"{ROOT}:{build_path('b')}"), timeout=120,
    )
    assert replayed.returncode == 1 and "Nondeterminism" in replayed.stdout, replayed.stdout + replayed.stderr
    same = subprocess.run(
        [sys.executable, "-m", "tests.support.rollout.replay_under", str(path)], cwd=ROOT, capture_output=True,
        text=True, env=worker_env(PYTHONPATH=f"{ROOT}:{build_path('a')}"), timeout=120,
    )
    assert same.returncode == 0, same.stdout + same.stderr


async def test_an_idle_conversation_moves_to_the_new_build_at_its_next_idle_point(client: AsyncClient, fleet: Fleet):
    await fleet.start("a")
    await fleet.current("a")
    await fleet.start("b")
    task_id = await client.start("hello", options(), task_queue=fleet.queue, keep_open=True)
    first = await client.send_goal(task_id, "first question")
    assert first.answer == "a: first question (2 messages)"
    await fleet.current("b")
    made_current = time.monotonic()

    async def moved() -> bool:
        return await run_version(client, task_id) == fleet.version("b")

    await eventually(moved, timeout=60)
    second = await asyncio.wait_for(client.send_goal(task_id, "second question"), 60)
    assert time.monotonic() - made_current < 60
    assert second.answer == "b: second question (3 messages)"  # the whole transcript came along
    await client.close_task(task_id)
    await asyncio.wait_for(client.result(task_id), 30)
    transcript = [m.text for m in await client.messages(task_id) if isinstance(m, (UserMessage, AssistantMessage))]
    assert transcript == ["hello", "first question", "second question"], transcript
    answers = [m.answer for m in await client.messages(task_id) if isinstance(m, Result)]
    assert answers == ["a: hello (1 messages)", "a: first question (2 messages)", "b: second question (3 messages)"]


async def test_a_ramp_splits_new_tasks_and_a_rollback_sends_them_back(client: AsyncClient, fleet: Fleet):
    await fleet.start("a")
    await fleet.current("a")
    await fleet.start("b")
    await asyncio.to_thread(set_ramping, fleet.address, fleet.deployment, "b", 50)

    async def answered(goal: str, task_id: str | None = None) -> str:
        task_id = await client.start(goal, options(), task_queue=fleet.queue, task_id=task_id)
        return (await asyncio.wait_for(client.result(task_id), 60)).answer

    # Temporal picks a ramping task's version from a hash of its id: a fair coin per task, the same
    # for the same id, so these fixed ids split the same way on every run (no flaky tail).
    answers = await asyncio.gather(*(answered(f"question {i}", f"ramp-split-{i}") for i in range(100)))
    on_b = sum(a.startswith("b:") for a in answers)
    assert 35 <= on_b <= 65, on_b

    # Rollback: b ramps no more and a stays current, so new tasks start on a again.
    await asyncio.to_thread(stop_ramping, fleet.address, fleet.deployment, "b")
    again = await asyncio.gather(*(answered(f"after the ramp {i}") for i in range(10)))
    assert all(a.startswith("a:") for a in again), again
    # b made current, then rolled back: a is current again at once.
    await fleet.current("b")
    assert all(a.startswith("b:") for a in await asyncio.gather(*(answered(f"on b {i}") for i in range(5))))
    await fleet.current("a")
    assert all(a.startswith("a:") for a in await asyncio.gather(*(answered(f"rolled back {i}") for i in range(5))))
