"""A running task whose next step fails on its workers (a payload key they lack, a code change
they cannot replay): what stops it, for Current Details and for a client waiting on it.

Temporal keeps retrying such a step; the task's history records the first failure, which the
event log shows as ``TaskStalled``. A pending workflow task past its first attempt says the task is
stuck there now, or only that its workflow task timed out (a busy worker's sticky queue): the
newest events tell which, read newest first, so a check costs one page of history however long
the task's is.
"""

from __future__ import annotations

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from noeta.client.events import EventStream, decode_event
from noeta.client.projection.stalls import stall_of
from noeta.protocols.events_task import TaskStalled

_WORKFLOW_TASK_ENDS = (EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
#: How many of a task's newest events a check asks for (the server answers in whole batches of
#: events) before it reads the whole event log.
TAIL_EVENTS = 50


async def current_stall(
    temporal: TemporalClient, task_id: str, description: WorkflowExecutionDescription | None = None
) -> TaskStalled | None:
    """The ``TaskStalled`` of a running task whose next step keeps failing on its workers; None for
    a task that moves (or has ended). ``description``: the task's, when the caller has just read it."""
    description = description or await temporal.get_workflow_handle(task_id).describe()
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    if description.raw_description.pending_workflow_task.attempt <= 1:
        return None
    latest = await _latest_workflow_task_end(temporal, task_id, description.run_id or "")
    if latest is None:  # a long tail of other events: the whole log says
        envelopes = await EventStream(temporal, task_id)
        last = envelopes[-1].payload if envelopes else None
        return last if isinstance(last, TaskStalled) else None
    if latest.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        return None  # a workflow task completed since: the task moves
    codec = temporal.data_converter.payload_codec
    if codec is not None:
        await decode_event(latest, codec)
    return stall_of(latest)  # None for a failure of Temporal's own bookkeeping


async def _latest_workflow_task_end(temporal: TemporalClient, task_id: str, run_id: str) -> HistoryEvent | None:
    """The run's newest WorkflowTaskCompleted or WorkflowTaskFailed event among its newest
    TAIL_EVENTS events (None: neither is among them)."""
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=temporal.namespace,
        execution=WorkflowExecution(workflow_id=task_id, run_id=run_id),
        maximum_page_size=TAIL_EVENTS,
    )
    response = await temporal.workflow_service.get_workflow_execution_history_reverse(request, retry=True)
    return next((event for event in response.history.events if event.event_type in _WORKFLOW_TASK_ENDS), None)


def stall_text(stall: TaskStalled) -> str:
    """One line saying what stops the task."""
    return f"a worker could not run the next step: {stall.error_type or 'error'}: {stall.message}"


__all__ = ["TAIL_EVENTS", "current_stall", "stall_text"]
