"""A running task whose next step fails on its workers (a payload key they lack, a code change
they cannot replay): what stops it, for Current Details and for a client waiting on it.

Temporal keeps retrying such a step; the task's history records the first failure, which the
event log shows as ``TaskStalled``. A pending workflow task past its first attempt says the task is
stuck there now.
"""

from __future__ import annotations

from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from noeta.client.events import EventStream
from noeta.protocols.events_task import TaskStalled


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
    envelopes = await EventStream(temporal, task_id)
    last = envelopes[-1].payload if envelopes else None
    return last if isinstance(last, TaskStalled) else None


def stall_text(stall: TaskStalled) -> str:
    """One line saying what stops the task."""
    return f"a worker could not run the next step: {stall.error_type or 'error'}: {stall.message}"


__all__ = ["current_stall", "stall_text"]
