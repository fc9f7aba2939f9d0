"""No silent waits: a client waiting for a task whose queue no worker polls says so — which
queue, and how to start a worker for it — and keeps waiting; a worker started then finishes it."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError, RPCStatusCode

from noeta.client import pollers, stalls
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.protocols.events_task import TaskStalled
from noeta.sdk.testing import FakeLLMProvider
from tests.support.processes import ROOT
from tests.support.scripts import say
from tests.support.waiting import eventually
from tests.test_http_api import api  # noqa: F401 (the HTTP API served on a local port)

#: The README's Client example, as a user runs it (no worker started).
README_CLIENT = textwrap.dedent("""
    from noeta.sdk import Client, Options

    client = Client()                                   # embedded server, or TEMPORAL_ADDRESS
    task_id = client.start("Triage ticket #4411", Options(allowed_tools=["lookup_ticket"]), keep_open=True)
    print(task_id, flush=True)
    print(client.send_goal(task_id, "Now draft the reply").answer)
""")


def recorded_calls(monkeypatch: pytest.MonkeyPatch, name: str, calls: list[str] | None = None) -> list[str]:
    """Make ``pollers.<name>`` (called with the Temporal client, then a task id or a queue) record
    that second argument of each call in ``calls`` (default: a new list), then do what it did."""
    calls = [] if calls is None else calls
    real = getattr(pollers, name)

    async def recording(temporal: Any, subject: str, **kwargs: Any) -> Any:
        calls.append(subject)
        return await real(temporal, subject, **kwargs)

    monkeypatch.setattr(pollers, name, recording)
    return calls


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "noeta.client" and "no worker polls" in r.getMessage()]


async def test_result_says_no_worker_polls_the_queue_and_finishes_once_one_does(
    client: AsyncClient, serve, task_queue: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.2)
    caplog.set_level(logging.WARNING, logger="noeta.client")
    provider = FakeLLMProvider(responses=[say("hi")])
    task_id = await client.start("Say hi.", Options(provider=provider), task_queue=task_queue)
    waiting = asyncio.ensure_future(client.result(task_id))
    await eventually(lambda: notices(caplog), timeout=15)
    assert notices(caplog) == [
        f"task {task_id} is waiting: no worker polls its task queue {task_queue!r}. Start one for it: "
        f"`noeta worker --task-queue {task_queue} --registry MODULE:REGISTRY` (the registry holding the "
        "task's tools and providers; `python -m noeta worker` where the script is not on PATH); still waiting"
    ]
    assert "python worker.py" not in notices(caplog)[0]  # a pip install has no worker.py
    assert not waiting.done()  # it keeps waiting
    async with serve(providers=[provider]):
        result = await asyncio.wait_for(waiting, 30)
    assert (result.status, result.answer) == ("completed", "hi")


async def test_a_goal_sent_to_a_task_no_worker_serves_says_so_and_gets_its_answer_later(
    client: AsyncClient, serve, task_queue: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.2)
    caplog.set_level(logging.WARNING, logger="noeta.client")
    provider = FakeLLMProvider(responses=[say("one"), say("two")])
    task_id = await client.start("First.", Options(provider=provider), task_queue=task_queue, keep_open=True)
    goal = asyncio.ensure_future(client.send_goal(task_id, "Second."))
    await eventually(lambda: notices(caplog), timeout=15)
    assert f"no worker polls its task queue {task_queue!r}" in notices(caplog)[0]
    assert not goal.done()
    async with serve(providers=[provider]):
        answer = await asyncio.wait_for(goal, 30)
        await client.close_task(task_id)
        await asyncio.wait_for(client.result(task_id), 30)
    assert answer.answer == "two"


async def test_a_served_queue_gets_no_notice(
    client: AsyncClient, serve, task_queue: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.0)
    monkeypatch.setattr(pollers, "LOOK_EVERY_SECONDS", 0.05)
    monkeypatch.setattr(pollers, "QUEUE_ANSWER_SECONDS", 0.0)  # the worker is seen as soon as it polls
    caplog.set_level(logging.WARNING, logger="noeta.client")
    looks: list[pollers.Look] = []
    real = pollers.look

    async def counted(temporal, task_id, **kwargs):  # the watcher's own looks, recorded
        looks.append(await real(temporal, task_id, **kwargs))
        return looks[-1]

    monkeypatch.setattr(pollers, "look", counted)
    provider = FakeLLMProvider(responses=[say("one")])
    async with serve(providers=[provider]):
        await eventually(lambda: pollers.queue_has_worker(client.temporal, task_queue))
        task_id = await client.start("First.", Options(provider=provider), task_queue=task_queue, keep_open=True)
        waiting = asyncio.ensure_future(client.result(task_id))  # the task idles, waiting for a goal
        await eventually(lambda: len(looks) >= 3)
        await client.close_task(task_id)
        result = await asyncio.wait_for(waiting, 30)
    assert result.answer == "one" and [(look.unpolled_queue, look.stall) for look in looks[:3]] == [(None, None)] * 3
    assert notices(caplog) == []


async def test_a_task_this_client_started_on_a_served_queue_is_not_described_at_the_first_look(
    client: AsyncClient, serve, task_queue: str, monkeypatch: pytest.MonkeyPatch
):
    """A client waiting on many tasks it started asks about their queue (one answer for all the
    waits on it) at the first look, not about each task: a fleet's waits do not describe every
    task 5 s in. A client that did not start the task describes it, as before."""
    monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.0)
    monkeypatch.setattr(pollers, "LOOK_EVERY_SECONDS", 3600.0)  # only the first look, in this test
    described = recorded_calls(monkeypatch, "look")
    asked = recorded_calls(monkeypatch, "_served")
    provider = FakeLLMProvider(responses=[say("one")])
    async with serve(providers=[provider]):
        await eventually(lambda: pollers.queue_has_worker(client.temporal, task_queue))
        task_id = await client.start("First.", Options(provider=provider), task_queue=task_queue, keep_open=True)
        waits = [asyncio.ensure_future(client.result(task_id)) for _ in range(20)]  # the task idles
        await eventually(lambda: len(asked) == 20)
        await asyncio.sleep(0.2)
        assert described == [] and asked == [task_queue] * 20
        # Another client (no memory of the start) looks at the task itself.
        other = AsyncClient(client.temporal, content_store=client.content_store, task_queue=task_queue)
        waiting_elsewhere = asyncio.ensure_future(other.result(task_id))
        await eventually(lambda: described == [task_id])
        await client.close_task(task_id)
        results = await asyncio.wait_for(asyncio.gather(*waits, waiting_elsewhere), 30)
        await other.close()
    assert {r.answer for r in results} == {"one"}


async def test_a_long_wait_describes_its_task_at_the_2nd_4th_and_8th_look(
    client: AsyncClient, serve, task_queue: str, monkeypatch: pytest.MonkeyPatch
):
    """Between those looks a wait on a task of a served queue asks only about the queue."""
    monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.0)
    monkeypatch.setattr(pollers, "LOOK_EVERY_SECONDS", 0.05)
    asked: list[str] = []
    recorded_calls(monkeypatch, "look", asked)
    recorded_calls(monkeypatch, "_served", asked)
    provider = FakeLLMProvider(responses=[say("one")])
    async with serve(providers=[provider]):
        await eventually(lambda: pollers.queue_has_worker(client.temporal, task_queue))
        task_id = await client.start("First.", Options(provider=provider), task_queue=task_queue, keep_open=True)
        waiting = asyncio.ensure_future(client.result(task_id))
        await eventually(lambda: len(asked) >= 9)
        await client.close_task(task_id)
        await asyncio.wait_for(waiting, 30)
    queue, task = task_queue, task_id
    assert asked[:9] == [queue, task, queue, task, queue, queue, queue, task, queue]
    assert [n for n in range(1, 70) if pollers._describes(n)] == [2, 4, 8, 16, 32, 48, 64]


async def test_a_stall_check_reads_the_newest_events_not_the_whole_log(
    client: AsyncClient, serve, task_queue: str, monkeypatch: pytest.MonkeyPatch
):
    """A task whose workflow task is past its first attempt (a busy worker's sticky queue timed it
    out, say) and that last completed one is not stalled, and telling so reads one page of its
    newest events, not its whole event log (the worker-key test shows a real stall found so)."""
    provider = FakeLLMProvider(responses=[say("one")])
    async with serve(providers=[provider]):
        task_id = await client.start("First.", Options(provider=provider), task_queue=task_queue, keep_open=True)

        async def idle() -> bool:
            return (await client.describe(task_id)).status == "idle"

        await eventually(idle)
        description = await client.temporal.get_workflow_handle(task_id).describe()
        description.raw_description.pending_workflow_task.attempt = 2

        def whole_log(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the whole event log was read")

        monkeypatch.setattr(stalls, "EventStream", whole_log)
        assert await stalls.current_stall(client.temporal, task_id, description) is None
        latest = await stalls._latest_workflow_task_end(client.temporal, task_id, "")
        assert latest is not None and latest.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        await client.close_task(task_id)
        await asyncio.wait_for(client.result(task_id), 30)


async def test_a_lasting_stall_is_told_once(monkeypatch: pytest.MonkeyPatch):
    """The watcher's own logic, without a server (its two questions are stubbed): the looks that
    only ask about the served queue know nothing of a stall, so a stall that lasts is not told
    again at the next look that describes the task."""
    monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.0)
    monkeypatch.setattr(pollers, "LOOK_EVERY_SECONDS", 0.001)
    stall = TaskStalled(error_type="EncryptionKeyError", message="no key 'v1'", key_id="v1")
    described: list[str] = []

    async def stalled(temporal: Any, task_id: str, **kwargs: Any) -> pollers.Look:
        described.append(task_id)
        return pollers.Look(stall=stall, task_queue="q")

    async def served(temporal: Any, queue: str) -> bool:
        return True

    monkeypatch.setattr(pollers, "look", stalled)
    monkeypatch.setattr(pollers, "_served", served)
    said: list[str] = []
    watcher = asyncio.ensure_future(pollers.watch(None, "t-1", said.append, "q"))  # type: ignore[arg-type]
    try:
        await eventually(lambda: len(described) >= 4)  # the 2nd, 4th, 8th and 16th looks
    finally:
        watcher.cancel()
    assert said == [pollers.stalled_message("t-1", stall)]


def test_the_readme_client_example_with_no_worker_says_so_within_15_seconds(temporal_server, tmp_path: Path):
    queue = f"readme-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "NOETA_HOME": str(tmp_path / "home"),
           "NOETA_TASK_QUEUE": queue, "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", README_CLIENT], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None and proc.stdout is not None
        task_id = proc.stdout.readline().strip()
        line = proc.stderr.readline()
        took = time.monotonic() - began
        assert line.startswith(f"task {task_id} is waiting: no worker polls its task queue '{queue}'"), line
        assert f"`noeta worker --task-queue {queue} --registry MODULE:REGISTRY`" in line
        assert took < 15, took
        assert proc.poll() is None  # still waiting
    finally:
        proc.kill()
        proc.wait()
    subprocess.run([str(Path(sys.executable).parent / "temporal"), "workflow", "terminate", "--address",
                    temporal_server.address, "--workflow-id", task_id, "--reason", "test over"],
                   capture_output=True, timeout=30)


async def test_the_console_shows_that_no_worker_polls_a_task_queue(api, client: AsyncClient, task_queue: str):  # noqa: F811
    created = await api.post("/tasks", json={"goal": "Wait.", "task_queue": task_queue})
    task_id = created.json()["task_id"]
    try:
        task = (await api.get(f"/tasks/{task_id}")).json()
        assert task["running"] is True
        assert task["current_details"].startswith(
            f"**no worker** · task {task_id} is waiting: no worker polls its task queue '{task_queue}'"
        )
        assert await client.waiting_for_worker(task_id) == task["current_details"].removeprefix("**no worker** · ")
    finally:
        await client.temporal.get_workflow_handle(task_id).terminate("test over")
    assert await client.waiting_for_worker(task_id) is None  # ended: nothing waits


def test_noeta_result_says_no_worker_polls_the_queue(temporal_server, client: AsyncClient, tmp_path: Path):
    queue = f"cli-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "NOETA_HOME": str(tmp_path / "home"),
           "NOETA_TASK_QUEUE": queue, "PYTHONPATH": str(ROOT)}
    started = subprocess.run([sys.executable, "-m", "noeta.cli", "start", "Wait.", "--queue", queue], env=env,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    task_id = started.stdout.split()[-1]
    proc = subprocess.Popen([sys.executable, "-m", "noeta.cli", "result", task_id], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"task {task_id} is waiting: no worker polls its task queue '{queue}'" in line, line
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        subprocess.run([str(Path(sys.executable).parent / "temporal"), "workflow", "terminate", "--address",
                        temporal_server.address, "--workflow-id", task_id, "--reason", "test over"],
                       capture_output=True, timeout=30)


async def test_waits_on_one_queue_ask_the_server_about_it_once(client: AsyncClient, task_queue: str, monkeypatch):
    """A thousand waits on one queue must not each ask the server about it every look: one answer
    serves every wait of the process for QUEUE_ANSWER_SECONDS, and a failed question is not kept."""
    asked = recorded_calls(monkeypatch, "_ask_queue")
    answers = await asyncio.gather(*(pollers.queue_has_worker(client.temporal, task_queue) for _ in range(200)))
    assert answers == [False] * 200 and asked == [task_queue]
    await pollers.queue_has_worker(client.temporal, task_queue)
    assert asked == [task_queue]
    other = f"{task_queue}-other"
    assert await pollers.queue_has_worker(client.temporal, other) is False and asked == [task_queue, other]

    async def failing(temporal, queue):
        asked.append(queue)
        raise RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")

    monkeypatch.setattr(pollers, "_ask_queue", failing)
    third = f"{task_queue}-third"
    for _ in range(2):
        with pytest.raises(RPCError):
            await pollers.queue_has_worker(client.temporal, third)
    assert asked[-2:] == [third, third]


async def test_a_kept_answer_counts_only_for_the_loop_that_asked(client: AsyncClient, task_queue: str, monkeypatch):
    """A synchronous Client's event loops come and go and their ids are reused: an answer kept for
    a loop that is gone (same id) is asked again, never awaited across loops."""
    asked: list[str] = []

    async def counted(temporal, queue):
        asked.append(queue)
        return False

    monkeypatch.setattr(pollers, "_ask_queue", counted)
    gone = asyncio.new_event_loop()
    try:
        stale = gone.create_future()
        stale.set_result(True)
        key = (id(asyncio.get_running_loop()), client.temporal.namespace, task_queue)
        monkeypatch.setitem(pollers._answers, client.temporal, {key: (time.monotonic(), stale)})
        assert await pollers.queue_has_worker(client.temporal, task_queue) is False and asked == [task_queue]
    finally:
        gone.close()


async def test_a_kept_answer_does_not_keep_its_client(temporal_server, task_queue: str):
    """The answers are kept per client, weakly: a client its owner let go of is collected (and with
    it the runtime it holds), its answers gone with it."""
    import gc
    import weakref

    from temporalio.client import Client as TemporalClient

    temporal = await TemporalClient.connect(temporal_server.address)
    assert await pollers.queue_has_worker(temporal, task_queue) is False  # asked, and kept
    assert temporal in pollers._answers
    gone = weakref.ref(temporal)
    del temporal
    gc.collect()
    assert gone() is None
