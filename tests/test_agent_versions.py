"""Named, versioned agents: tasks record the version they ran, a fork can move a task onto another
version, a ramp sends a share of new tasks to the new version by task id, and the deploy gate
replays version 1's recorded tasks under version 2 and lists the changed decisions."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from noeta.client.agent_replay import replay_versions
from noeta.client.agents import Agents, fork_onto, ramped, start_agent
from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError
from noeta.protocols.task import TaskInput
from tests.support.agents import agents, provider


async def recorded_agent(client: AsyncClient, task_id: str) -> str:
    """The agent version in the task's recorded input (its metadata) and its NoetaMetadata."""
    handle = client.temporal.get_workflow_handle(task_id)
    started = (await handle.fetch_history()).events[0].workflow_execution_started_event_attributes
    (task_input,) = await client.temporal.data_converter.decode(started.input.payloads, [TaskInput])
    indexed = (await handle.describe()).search_attributes.get("NoetaMetadata", [])
    assert f"agent={task_input.metadata['agent']}" in indexed
    return task_input.metadata["agent"]


async def test_tasks_record_their_agent_version_and_a_fork_moves_one_to_another(client: AsyncClient, serve, task_queue):
    async with serve(providers=[provider]):
        v1 = [await start_agent(client, agents, f"ticket {i}", "triage@1", task_queue=task_queue) for i in range(3)]
        v2 = await start_agent(client, agents, "ticket 9", "triage", task_queue=task_queue)  # the current version: the highest, 2
        answers = [(await client.result(t)).answer for t in [*v1, v2]]
        assert answers == ["a thorough answer to ticket 0", "a thorough answer to ticket 1",
                           "a thorough answer to ticket 2", "short."]
        assert [await recorded_agent(client, t) for t in [*v1, v2]] == ["triage@1"] * 3 + ["triage@2"]

        fork = await fork_onto(client, agents, v1[0], "triage@2", at_turn=1)
        assert (await client.result(fork)).answer == "short."
        assert await recorded_agent(client, fork) == "triage@2"

        async def indexed() -> list[str]:
            query = "NoetaMetadata = 'agent=triage@2'"
            return [w.id async for w in client.temporal.list_workflows(query)]

        for _ in range(50):  # visibility is eventually consistent
            if {v2, fork} <= set(await indexed()):
                break
            await asyncio.sleep(0.2)
        assert {v2, fork} <= set(await indexed())

        # The deploy gate: version 1's last tasks asked again under version 2.
        report = await replay_versions(client, agents, "triage@1", "triage@2", last=3)
        assert report.tasks == 3 and sorted(c.task_id for c in report.changed) == sorted(v1)
        assert all(c.new.answer == "short." for c in report.changed)
        same = await replay_versions(client, agents, "triage@1", "triage@1", last=3)
        assert same.changed == ()


def test_a_ramp_takes_its_share_of_new_tasks_by_task_id_and_ends_with_a_rollback():
    catalog = Agents()
    catalog.add("triage", 1, agents.get("triage@1").options)
    catalog.add("triage", 2, agents.get("triage@2").options)
    catalog.set_current("triage", 1)
    catalog.ramp("triage", 2, 50)
    ids = [uuid.uuid4().hex for _ in range(1000)]
    chosen = [catalog.choose("triage", t).version for t in ids]
    assert 350 <= chosen.count(2) <= 650
    assert chosen == [catalog.choose("triage", t).version for t in ids]  # the same task id, the same version
    assert all(ramped(t, 50) == (v == 2) for t, v in zip(ids, chosen, strict=True))
    assert catalog.get("triage").version == 1  # the current version while 2 ramps
    catalog.ramp("triage", 2, 0)  # rollback: no new task starts on 2
    assert {catalog.choose("triage", t).version for t in ids} == {1}
    catalog.set_current("triage", 2)  # promotion
    assert {catalog.choose("triage", t).version for t in ids} == {2}
    with pytest.raises(ConfigurationError):
        catalog.get("triage@3")
