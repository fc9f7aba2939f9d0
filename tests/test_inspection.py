"""The Temporal UI as an inspection surface: summaries in history, searchable task attributes."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk.testing import FakeLLMProvider
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually


def decode(client: AsyncClient, payload) -> str:
    return client.temporal.data_converter.payload_converter.from_payload(payload)


async def test_every_activity_has_a_summary_and_the_task_is_searchable(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 2, "b": 40})), say("42")])
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "What is 2 + 40?", Options(provider=provider, model="fake-model", allowed_tools=[add]), task_queue=task_queue
        )
        await client.result(task_id)

    history = await client.history(task_id)
    started = history[0]
    summaries = {}
    for event in history:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            summaries.setdefault(name, []).append(decode(client, event.user_metadata.summary))
    assert summaries["noeta.call_model"] == ["FakeLLMProvider fake-model · turn 1", "FakeLLMProvider fake-model · turn 2"]
    assert summaries["noeta.invoke_tool"] == ['add({"a":2,"b":40})']
    goal = decode(client, started.user_metadata.summary)
    assert goal == "What is 2 + 40?"

    async def found() -> bool:
        tasks = [t for t in await client.list_tasks(status="completed", limit=200) if t.task_id == task_id]
        return bool(tasks) and tasks[0].turns == 2

    await eventually(found)  # visibility is eventually consistent
    [summary] = [t for t in await client.list_tasks(status="completed", limit=200) if t.task_id == task_id]
    assert (summary.model, summary.turns, summary.tokens_in, summary.tokens_out) == ("fake-model", 2, 20, 8)
    query = f"NoetaModel = 'fake-model' AND NoetaTokensOut >= 8 AND WorkflowId = '{task_id}'"
    assert [wf.id async for wf in client.temporal.list_workflows(query)] == [task_id]
