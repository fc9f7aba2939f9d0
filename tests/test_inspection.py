"""The Temporal UI as an inspection surface: summaries in history, searchable task attributes."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.temporal.converter import NoetaPayloadConverter
from noeta.errors import ConfigurationError
from noeta.protocols.names import DEFAULT_INDEX_INTERVAL_SECONDS, INDEX_INTERVAL_SECONDS
from noeta.protocols.task import TaskInput
from noeta.sdk.testing import FakeLLMProvider
from noeta.temporal.search_attributes import TURNS
from tests.support.scripts import call, say
from tests.support.tools import add, slow_append
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


async def _counter_upserts(client: AsyncClient, serve, task_queue, tmp_path, monkeypatch, interval) -> tuple[int, int]:
    """(upserts, turns indexed at the end) of a 2-turn task whose tool takes 1.2 s."""
    monkeypatch.setenv("NOETA_TEST_LOG", str(tmp_path / "log"))
    provider = FakeLLMProvider(responses=[call(("c1", "slow_append", {"seconds": 1.2, "text": "x"})), say("done")])
    async with serve(tools=[slow_append], providers=[provider]):
        options = Options(provider=provider, allowed_tools=[slow_append], index_interval_seconds=interval)
        task_id = await client.start("slow", options, task_queue=task_queue)
        await client.result(task_id)
    history = await client.history(task_id)
    upserts = sum(1 for e in history if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
    description = await client.temporal.get_workflow_handle(task_id).describe()
    return upserts, description.typed_search_attributes.get(TURNS)


async def test_counters_are_refreshed_between_status_changes_at_the_interval_set(
    client: AsyncClient, serve, task_queue, tmp_path, monkeypatch
):
    # The second model call comes at least 1.2 s after the start: with a 1 s interval its counters
    # are indexed then (the first call's too, on a machine slow enough), then with the final status.
    upserts, turns = await _counter_upserts(client, serve, task_queue, tmp_path, monkeypatch, 1)
    assert upserts >= 2 and turns == 2


async def test_without_an_interval_counters_are_indexed_only_with_status_changes(
    client: AsyncClient, serve, task_queue, tmp_path, monkeypatch
):
    # None: one upsert, at the end, which still carries the final counters.
    assert await _counter_upserts(client, serve, task_queue, tmp_path, monkeypatch, None) == (1, 2)


def test_the_interval_is_bounded_and_older_tasks_keep_theirs():
    with pytest.raises(ConfigurationError, match="index_interval_seconds"):
        Options(index_interval_seconds=0.5)
    assert Options().index_interval_seconds == DEFAULT_INDEX_INTERVAL_SECONDS == 300.0
    # A TaskInput recorded before the field existed decodes to the interval those tasks used.
    legacy = NoetaPayloadConverter().from_payloads(
        NoetaPayloadConverter().to_payloads([{"goal": "g", "provider": "p", "tools": []}]), [TaskInput]
    )[0]
    assert legacy.index_interval_seconds == INDEX_INTERVAL_SECONDS == 10.0
