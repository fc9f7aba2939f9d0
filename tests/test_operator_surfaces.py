"""What operators and approvers see of a task outside Noeta's own surfaces: refused calls are not
tool activities, current details say what a task waits for, tasks are findable by goal, metadata
and resolved model, registered guards / validators / output models are usable by name, and tools
named by string keep the identity recorded at start."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import OutputModelNotRegisteredError, ToolIdentityMismatchError
from noeta.protocols.names import INVOKE_TOOL, PATCH_REFUSALS_RECORDED, REFUSED_MEMO_KEY
from noeta.protocols.tool import ToolResult
from noeta.protocols.validation import expect_validator
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.chat_server import FakeChatServer, completion, openai_for
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, runs, wire_money


@pytest.fixture(autouse=True)
def clear_runs():
    runs.clear()


def scheduled_tool_calls(history) -> list[str]:
    """Call ids of the invoke_tool activities the task scheduled (decoded from their inputs)."""
    import json

    ids = []
    for event in history:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == INVOKE_TOOL:
                ids.append(json.loads(attrs.input.payloads[0].data)["call_id"])
    return ids


async def test_refused_calls_are_recorded_not_scheduled(client: AsyncClient, serve, task_queue):
    # c1: denied by the guard; c2: no such tool; c3: a human refuses; c4: a human approves.
    provider = FakeLLMProvider(
        responses=[
            call(("c1", "wire_money", {"amount": 5_000_000}), ("c2", "nope", {}),
                 ("c3", "wire_money", {"amount": 2000}), ("c4", "wire_money", {"amount": 3000})),
            say("paid 3000"),
        ]
    )
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay", options, task_queue=task_queue)
        await eventually(lambda: _waiting(client, task_id, {"c3", "c4"}))
        await client.approve(task_id, "c3", False, "not this one", "bob")
        await client.approve(task_id, "c4", True, "ok", "alice")
        assert (await client.result(task_id)).answer == "paid 3000"
    assert runs == [{"amount": 3000}]

    history = await client.history(task_id)
    assert scheduled_tool_calls(history) == ["c4"]  # no activity for a refused call
    markers = [e for e in history if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and e.marker_recorded_event_attributes.marker_name == "core_patch"]
    # A task on the built-in policy takes the patch's path without asking (noeta.workflows.patches):
    # no marker, no TemporalChangeVersion upsert.
    assert not any(PATCH_REFUSALS_RECORDED.encode() in e.SerializeToString() for e in markers)
    memos = [e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
             and REFUSED_MEMO_KEY in e.workflow_properties_modified_event_attributes.upserted_memo.fields]
    assert len(memos) == 3

    envelopes = await client.events(task_id)
    refused = {e.payload.call_id: e.payload for e in envelopes if e.type == "ToolCallRefused"}
    assert set(refused) == {"c1", "c2", "c3"}
    assert refused["c1"].reason == "Denied by guard 'amount': amount above the hard limit"
    assert refused["c2"].reason.startswith("Unknown tool 'nope'")
    assert refused["c3"].reason == "Not approved by bob: not this one"
    assert [e.payload.call_id for e in envelopes if e.type in ("ToolCallStarted", "ToolCallCompleted")] == ["c4", "c4"]
    # The model got every refusal as a failed result, in call order, in one tool message.
    [results] = [m for m in provider.received_requests[1].messages if m.role == "tool"]
    assert [(b.call_id, b.success) for b in results.content] == [("c1", False), ("c2", False), ("c3", False), ("c4", True)]
    assert results.content[0].output == refused["c1"].reason
    rounds = [e for e in envelopes if e.type == "MessagesAppended" and e.payload.messages[0].role == "tool"]
    assert [[b.call_id for b in e.payload.messages[0].content] for e in rounds] == [["c1", "c2", "c3", "c4"]]
    by_seq = {e.seq: e for e in envelopes}
    assert all(by_seq[r.causation_id].type == "ToolCallProposed" for r in envelopes if r.type == "ToolCallRefused")


async def _waiting(client: AsyncClient, task_id: str, call_ids: set[str]) -> bool:
    return {r.call_id for r in await client.pending_approvals(task_id)} == call_ids


async def test_current_details_say_what_the_task_waits_for(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid"), say("again")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay the invoice", options, task_queue=task_queue, keep_open=True)
        await eventually(lambda: _waiting(client, task_id, {"c1"}))
        details = await client.current_details(task_id)
        assert "**awaiting approval**: wire_money(amount=2500) — guard amount: wire of 2500 needs a human" in details
        assert '`{"call_id": "c1", "approved": true}`' in details  # how to answer from the Temporal UI
        assert '`refuse`' in details
        await client.approve(task_id, "c1", True, approver="ops")

        async def idle() -> bool:
            return "**idle**" in await client.current_details(task_id)

        await eventually(idle)
        assert "waiting for the next goal" in await client.current_details(task_id)
        await client.close_task(task_id)
        await client.result(task_id)
    assert await client.current_details(task_id) == ""  # ended: nothing to wait for


async def test_tasks_are_findable_by_goal_metadata_and_resolved_model(
    client: AsyncClient, serve, task_queue, chat: FakeChatServer
):
    chat.reply(completion({"content": "listed"}))
    provider = openai_for(chat, "openai-default-model")  # its default model is gpt-test
    indexing = AsyncClient(
        client.temporal, content_store=client.content_store, task_queue=task_queue
    )
    indexing.indexed_metadata = ("customer",)
    word = f"zebra{task_queue[2:]}"
    async with serve(providers=[provider]):
        task_id = await indexing.start(
            f"Refund the {word} order", Options(provider=provider, metadata={"customer": "acme", "secret": "x"})
        )
        await indexing.result(task_id)

    async def found() -> bool:
        tasks = await indexing.list_tasks(search=word)
        return [t.task_id for t in tasks] == [task_id] and tasks[0].status == "completed"

    await eventually(found)
    [summary] = await indexing.list_tasks(search=word)
    assert (summary.goal, summary.model, summary.metadata) == (f"Refund the {word} order", "gpt-test", {"customer": "acme"})
    assert [t.task_id for t in await indexing.list_tasks(metadata={"customer": "acme"}, search=word)] == [task_id]
    assert await indexing.list_tasks(metadata={"customer": "globex"}, search=word) == []
    assert [t.task_id for t in await indexing.list_tasks(model="gpt-test", search=word)] == [task_id]
    info = await indexing.describe(task_id)
    assert (info.running, info.status, info.result.answer) == (False, "completed", "listed")


async def test_guards_and_validators_by_registered_name(client: AsyncClient, serve, task_queue):
    checked = []

    def positive(data) -> bool | str:
        checked.append(data)
        return True

    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 5_000_000})), say("refused it")])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]) as registry:
        registry.add_validator(expect_validator(positive, name="positive"))
        options = Options(provider=provider, allowed_tools=["wire_money"], guards=["amount"], validators=["positive"])
        task_id = await client.start("pay", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "refused it"
    assert runs == [] and checked == ["refused it"]
    [refused] = [e.payload for e in await client.events(task_id) if e.type == "ToolCallRefused"]
    assert refused.reason.startswith("Denied by guard 'amount'")


class Invoice(BaseModel):
    number: int


async def test_output_model_by_registered_name(client: AsyncClient, serve, task_queue):
    name = f"{Invoice.__module__}:{Invoice.__qualname__}"
    provider = FakeLLMProvider(responses=[say('{"number": "x"}'), say('{"number": 7}')])
    async with serve(providers=[provider]) as registry:
        registry.add_output_model(Invoice)
        task_id = await client.start("invoice", Options(provider=provider, output_schema=name), task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.answer, result.data) == ('{"number": 7}', {"number": 7})
    assert provider.received_requests[0].output_schema == Invoice.model_json_schema()

    other = FakeLLMProvider(responses=[say("unused")])
    async with serve(providers=[other]):
        task_id = await client.start("invoice", Options(provider=other, output_schema=name), task_queue=task_queue)
        with pytest.raises(OutputModelNotRegisteredError, match="is not registered on this worker"):
            await client.result(task_id)
    assert other.received_requests == []


async def test_a_tool_named_by_string_keeps_the_identity_recorded_at_start(client: AsyncClient, serve, task_queue):
    ran = []

    @tool(name="add", version="2", input_schema=add.input_schema)
    def add_v2(arguments, ctx):  # pragma: no cover - must never run
        ran.append(arguments)
        return ToolResult(success=True, output="wrong")

    swapped = threading.Event()

    def responder(request):  # the model asks for the tool only once the worker's tool changed
        assert swapped.wait(20)
        return call(("c1", "add", {"a": 1, "b": 2}))

    provider = FakeLLMProvider(responder=responder)
    async with serve(tools=[add], providers=[provider]) as registry:
        # By name, as over HTTP or `noeta start --tool add`: the starter has no tool object.
        task_id = await client.start("x", Options(provider=provider, allowed_tools=["add"]), task_queue=task_queue)
        while not provider.received_requests:
            await asyncio.sleep(0.01)
        [plan] = [e.payload for e in await client.events(task_id) if e.type == "ContextPlanComposed"]
        assert plan.tool_fingerprints == {"add": add.fingerprint}  # the worker's, recorded at start
        registry.tools["add"] = add_v2
        swapped.set()
        with pytest.raises(ToolIdentityMismatchError, match="tool 'add' changed identity"):
            await client.result(task_id)
    assert ran == []


def test_options_take_names_and_objects_but_not_junk():
    from noeta.errors import ConfigurationError

    options = Options(guards=["amount", AmountGuard(name="other")], validators=["positive"], output_schema="m:Model")
    assert (options.guard_names(), options.validator_names()) == (["amount", "other"], ["positive"])
    for bad in (dict(guards="amount"), dict(guards=["amount", "amount"]), dict(guards=[""]), dict(guards=[3]),
                dict(output_schema="NoColon"), dict(validators=["x", "x"])):
        with pytest.raises(ConfigurationError):
            Options(**bad)
    assert dataclasses.replace(options, guards=()).guard_names() == []
