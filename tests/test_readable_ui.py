"""What the Temporal UI shows of a task, read from the task's history as the UI reads it: a failed
task's failure has the message and Noeta's error type without a stack trace (a bug's exception
keeps its traceback), and a human's approval and refusal read as such on the timeline, with the
approver."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ProviderError
from noeta.protocols.names import UPDATE_APPROVE, UPDATE_REFUSE
from noeta.sdk.testing import FakeLLMProvider
from noeta.temporal.failures import ReadableFailureConverter
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, pending, wire_money


def chain(failure: Failure) -> list[Failure]:
    nodes = [failure]
    while nodes[-1].HasField("cause"):
        nodes.append(nodes[-1].cause)
    return nodes


def refuse_to_answer(request):
    raise ProviderError(provider="FakeLLMProvider", message="the account is closed", retryable=False)


async def test_a_failed_tasks_result_has_no_stack_trace(client: AsyncClient, serve, task_queue: str):
    provider = FakeLLMProvider(responder=refuse_to_answer)
    async with serve(providers=[provider]):
        task_id = await client.start("hello", Options(provider=provider), task_queue=task_queue)
        await eventually(lambda: ended(client, task_id))
    history = await client.history(task_id)
    [failed] = [e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED]
    failure = failed.workflow_execution_failed_event_attributes.failure
    assert failure.application_failure_info.type == "ProviderError"
    assert "the account is closed" in failure.message
    assert [node.stack_trace for node in chain(failure)] == [""] * len(chain(failure))
    # The failed step's own event reads the same way.
    [step] = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    step_failure = step.activity_task_failed_event_attributes.failure
    assert (step_failure.application_failure_info.type, step_failure.stack_trace) == ("ProviderError", "")


async def ended(client: AsyncClient, task_id: str) -> bool:
    return (await client.temporal.get_workflow_handle(task_id).describe()).close_time is not None


def failure_of(exc: BaseException) -> Failure:
    try:
        raise exc
    except BaseException as raised:
        failure = Failure()
        ReadableFailureConverter().to_failure(raised, DataConverter.default.payload_converter, failure)
        return failure


def test_a_bugs_exception_keeps_its_traceback_and_a_user_error_type_too():
    assert "failure_of" in failure_of(KeyError("missing")).stack_trace  # a bug: where it happened matters
    assert failure_of(ApplicationError("no", type="MyToolError")).stack_trace != ""  # not Noeta's to judge
    typed = failure_of(ApplicationError("no", type="ProviderError"))
    assert (typed.stack_trace, typed.application_failure_info.type) == ("", "ProviderError")


async def test_approvals_and_refusals_read_as_such_on_the_timeline(client: AsyncClient, serve, task_queue: str):
    provider = FakeLLMProvider(
        responses=[call(("c1", "wire_money", {"amount": 2000}), ("c2", "wire_money", {"amount": 3000})), say("ok")]
    )
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay twice", options, task_queue=task_queue)
        await eventually(lambda: pending(client, task_id))
        await client.approve(task_id, "c1", approved=False, approver="bob", reason="duplicate")
        await client.approve(task_id, "c2", approved=True, approver="alice")
        assert (await client.result(task_id)).answer == "ok"
    history = await client.history(task_id)
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert updates == [UPDATE_REFUSE, UPDATE_APPROVE]
    summaries = [
        client.temporal.data_converter.payload_converter.from_payloads([e.user_metadata.summary])[0]
        for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert [s for s in summaries if s.startswith("approved by")] == ['approved by alice: wire_money({"amount":3000})']
    # The event log reads both answers as before.
    answers = [(e.type, e.payload.approver) for e in await client.events(task_id) if e.type.startswith("Approval") and e.type != "ApprovalRequested"]
    assert sorted(answers) == [("ApprovalDenied", "bob"), ("ApprovalGranted", "alice")]
