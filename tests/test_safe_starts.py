"""Starts are safe to retry: a start whose answer is lost is sent again with the same task id and
request id, so a burst of starts through RPC timeouts makes each task exactly once; an id that
exists returns its task for the same input and is refused for another; ids and queues given by
callers are checked before anything starts."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid

import pytest

from noeta.client import starts
from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.protocols.ids import MAX_ID_CHARS
from noeta.sdk import ConfigurationError, TaskAlreadyExistsError, TaskNotFoundError
from noeta.worker import Registry, build_worker
from tests.support.waiting import eventually
from tests.support.stalling_proxy import StallingProxy

#: Starts in the burst: given ids, and as many left to the client (a fresh id per call).
GIVEN, GENERATED = 150, 50


async def tasks_on(client: AsyncClient, queue: str) -> list[str]:
    """The id of every workflow run started on ``queue`` (a duplicate id would show twice)."""
    return [w.id async for w in client.temporal.list_workflows(f"TaskQueue = '{queue}'")]


async def listed_once(client: AsyncClient, queue: str, task_id: str) -> None:
    """The queue lists ``task_id`` exactly once (visibility lags a start a moment under load; a
    duplicate would be listed twice, and never match)."""

    async def once() -> bool:
        return await tasks_on(client, queue) == [task_id]

    await eventually(once, timeout=30)


async def terminate(client: AsyncClient, ids: list[str]) -> None:
    await asyncio.gather(*(client.temporal.get_workflow_handle(i).terminate("test over") for i in ids))


async def test_a_burst_of_starts_through_rpc_timeouts_makes_every_task_once(
    temporal_server, host: HostConfig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    proxy = StallingProxy(("127.0.0.1", int(temporal_server.address.rsplit(":", 1)[1])))
    settings = host.settings.model_copy(update={"temporal_address": proxy.address})
    client = await AsyncClient.connect(dataclasses.replace(host, settings=settings))
    await client.registered_attributes()  # asked once per client: not part of the burst
    monkeypatch.setattr(starts, "ATTEMPT_TIMEOUT_SECONDS", 1.0)
    caplog.set_level(logging.INFO, logger="noeta.client.starts")
    queue = f"burst-{uuid.uuid4().hex[:8]}"
    given = [f"{queue}-{i}" for i in range(GIVEN)]

    proxy.stall()  # the server gets the starts and creates the tasks; its answers are held back
    calls = [client.start("Count to 3.", Options(), task_id=i, task_queue=queue) for i in given]
    calls += [client.start("Count to 3.", Options(), task_queue=queue) for _ in range(GENERATED)]
    burst = asyncio.gather(*calls)
    resent = lambda: [r for r in caplog.records if "sending it again" in r.getMessage()]  # noqa: E731
    while len(resent()) < GIVEN // 2 and not burst.done():
        await asyncio.sleep(0.05)
    proxy.resume()
    started = await asyncio.wait_for(burst, 120)

    try:
        assert len(resent()) >= GIVEN // 2  # the timeouts did happen, and every start still returned
        assert any("CANCELLED" in r.getMessage() or "DEADLINE" in r.getMessage() for r in resent())
        assert started[:GIVEN] == given
        assert len(set(started)) == GIVEN + GENERATED
        on_server = await tasks_on(client, queue)
        for _ in range(100):  # visibility catches up with the starts a moment later
            if len(on_server) >= len(started):
                break
            await asyncio.sleep(0.1)
            on_server = await tasks_on(client, queue)
        assert sorted(on_server) == sorted(started)  # no orphan, no duplicate
    finally:
        await terminate(client, started)
        proxy.close()


async def test_the_same_id_returns_its_task_for_the_same_input_and_is_refused_for_another(client: AsyncClient):
    queue = f"again-{uuid.uuid4().hex[:8]}"
    task_id = f"{queue}-task"
    options = Options(system_prompt="Be brief.", max_turns=3)
    assert await client.start("Plan the week.", options, task_id=task_id, task_queue=queue) == task_id
    assert await client.start("Plan the week.", options, task_id=task_id, task_queue=queue) == task_id

    for goal, other in (("Plan the month.", options), ("Plan the week.", Options(system_prompt="Be long."))):
        with pytest.raises(TaskAlreadyExistsError) as refused:
            await client.start(goal, other, task_id=task_id, task_queue=queue)
        assert refused.value.task_id == task_id
        assert "another input" in str(refused.value)
    await listed_once(client, queue, task_id)

    # An ended task keeps its id: the same start returns it, it is not run again.
    await client.cancel(task_id)
    await client.temporal.get_workflow_handle(task_id).terminate("no worker in this test")
    assert await client.start("Plan the week.", options, task_id=task_id, task_queue=queue) == task_id
    with pytest.raises(TaskAlreadyExistsError):
        await client.start("Plan the month.", options, task_id=task_id, task_queue=queue)
    await listed_once(client, queue, task_id)


@pytest.mark.parametrize(
    ("task_id", "task_queue", "message"),
    [
        ("has space", "{q}", "task_id 'has space' is not allowed: ' ' at position 3"),
        ("a/b", "{q}", "task_id 'a/b' is not allowed: '/' at position 1"),
        ("-leading", "{q}", "task_id '-leading' is not allowed: '-' at position 0"),
        ("tab\there", "{q}", "is not allowed: '\\t' at position 3"),
        ("t" * (MAX_ID_CHARS + 1), "{q}", f"task_id has {MAX_ID_CHARS + 1} characters; at most {MAX_ID_CHARS}"),
        ("", "{q}", "task_id must not be empty"),
        ("ok-id", "{q}?x", "' is not allowed: '?' at position 12"),
        ("ok-id", "q" * (MAX_ID_CHARS + 1), f"task_queue has {MAX_ID_CHARS + 1} characters"),
        ("ok-id", "ünï", "task_queue 'ünï' is not allowed: 'ü' at position 0"),
    ],
)
async def test_odd_task_ids_and_queues_are_refused_before_anything_starts(
    client: AsyncClient, task_id: str, task_queue: str, message: str
):
    queue = f"odd-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigurationError) as refused:
        await client.start("Plan the week.", Options(), task_id=task_id, task_queue=task_queue.format(q=queue))
    assert message in str(refused.value)
    assert await tasks_on(client, queue) == []


async def test_a_misspelt_start_keyword_is_refused_before_anything_starts(client: AsyncClient):
    """The starting calls take who starts a task as ``**start_as``: a keyword that is not one is a
    TypeError naming it, as for any unknown keyword, and no task and no schedule exist after."""
    task_id = f"misspelt-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TypeError, match="'tennant'"):
        await client.start("Plan the week.", Options(), task_id=task_id, tennant="acme")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'queue'"):
        await client.create_schedule(task_id, "Plan the week.", every=60, queue="q")  # type: ignore[call-arg]
    with pytest.raises(TaskNotFoundError):
        await client.describe(task_id)
    assert task_id not in {s.schedule_id for s in await client.list_schedules()}


def test_a_worker_refuses_an_odd_task_queue(client: AsyncClient, content_store):
    with pytest.raises(ConfigurationError, match="task_queue 'my queue' is not allowed: ' ' at position 2"):
        build_worker(client.temporal, Registry.of(content_store=content_store), "my queue")
