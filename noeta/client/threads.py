"""Conversation threads in one call: ``Client.send(thread_id, message)`` starts the thread's task
if it does not exist and sends it the message otherwise, in one request (Temporal's
Update-with-Start), and returns the answer.

The message travels twice, by design: as the first goal of the task the request may start, and
as the ``send_goal`` update. Both carry the same id (the request id): the task's first run knows
its first goal by it (``TaskInput.goal_id``), so the update of the request that started the task
follows that goal instead of sending it again, and Temporal answers a repeated update id with the
first one's outcome. A retried request with the same id therefore neither starts a second task
nor sends the message twice.
"""

from __future__ import annotations

import dataclasses
import uuid

from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from typing_extensions import Unpack

from noeta.client.deltas import ClientDeltas
from noeta.client.failures import translate_failure
from noeta.client.options import Options, build_task_input
from noeta.client.start_request import StartAs, StartKeywords, workflow_start
from noeta.client.task_input import check_goal, check_if_busy, task_provider_name
from noeta.client.tasks import TaskOperations
from noeta.errors import TaskNotOpenError
from noeta.protocols.ids import check_task_id
from noeta.protocols.interaction import GoalInput, TaskResult
from noeta.protocols.names import UPDATE_SEND_GOAL
from noeta.protocols.statuses import IfBusy


async def send_to_thread(
    tasks: TaskOperations,
    thread_id: str,
    message: str,
    options: Options | None,
    *,
    request_id: str | None,
    if_busy: IfBusy,
    start_as: StartAs,
) -> TaskResult:
    """Send ``message`` to the keep-open task ``thread_id``, starting it with ``options`` if it
    does not exist (TaskNotOpenError for a thread that has ended); returns the answer."""
    check_task_id(thread_id)
    check_goal(message)
    check_if_busy(if_busy)
    request_id = request_id or uuid.uuid4().hex
    options = options or Options()
    task_input = build_task_input(
        options, message, provider_name=task_provider_name(options.provider), keep_open=True, images=(),
        workspace_dir=None, task_id=thread_id,
    )
    connection = tasks.connection
    start = await workflow_start(
        connection, dataclasses.replace(task_input, goal_id=request_id), start_as,
        task_queue=tasks.task_queue, indexed_metadata=tasks.indexed_metadata,
    )
    operation: WithStartWorkflowOperation[object, TaskResult] = WithStartWorkflowOperation(
        start.workflow,
        start.task_input,
        id=thread_id,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # A thread that ended stays ended: a new task under its id would start without its transcript.
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        **start.request_options(),
    )
    goal = GoalInput(goal=message, goal_id=request_id, if_busy=if_busy, tenant=start_as.tenant)
    temporal = connection.acting_as(start_as.identity)
    try:
        async with connection.reaching(thread_id), tasks.waiting(thread_id):
            result: TaskResult = await temporal.execute_update_with_start_workflow(
                UPDATE_SEND_GOAL, goal, start_workflow_operation=operation, id=request_id, result_type=TaskResult,
            )
    except WorkflowAlreadyStartedError as err:
        raise TaskNotOpenError(f"thread {thread_id!r} has ended: start a new thread under another id") from err
    except WorkflowUpdateFailedError as err:
        raise translate_failure(err) from err
    tasks.observation.follow(thread_id, options.observers)
    return result


class ThreadCalls:
    """``AsyncClient.send``: a part of :class:`~noeta.client.client.AsyncClient`, which forwards it
    here, handed to :func:`send_to_thread` with the client's task operations and deltas."""

    def __init__(self, tasks: TaskOperations, deltas: ClientDeltas) -> None:
        """Threads' tasks start and take messages through ``tasks``; their answers come from ``deltas``."""
        self._tasks = tasks
        self._deltas = deltas

    async def send(
        self, thread_id: str, message: str, options: Options | None = None, *, request_id: str | None = None,
        if_busy: IfBusy = "enqueue", **start_as: Unpack[StartKeywords],
    ) -> TaskResult:
        """Send ``message`` to the conversation ``thread_id`` in one request: its keep-open task is
        started (with ``options``, and ``start``'s other keywords) if it does not exist; returns the
        answer. Retried with the same ``request_id``, it starts no second task and sends nothing
        twice; ``if_busy`` as for ``send_goal`` (docs/conversations.md)."""
        started_as = StartAs.given(start_as)
        self._deltas.follow(thread_id)
        sent = send_to_thread(self._tasks, thread_id, message, options, request_id=request_id, if_busy=if_busy,
                              start_as=started_as)
        return await self._deltas.settled(thread_id, sent)


__all__ = ["ThreadCalls", "send_to_thread"]
