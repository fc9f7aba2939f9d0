"""Starting a task's workflow so that a start can be retried safely.

A start whose answer is lost (an RPC timeout, a connection cut while the server was creating the
workflow) says nothing about whether the task exists. So a start is one request with one task id
and one request id, sent again on a transient failure until the server answers:

- the server de-duplicates a request id it has seen: the retry of a start that did create the
  task returns that task (Temporal's Python client gives each call a fresh request id, so
  :func:`start_workflow` sets the request's own; see :func:`with_request_id`);
- the id is never reused: a task id names one task, running or ended. When it is taken, the
  existing task's first input is compared with this start's: the same input is the same start
  (a retry, or a caller starting its idempotent id again) and returns the task; a different one
  raises :class:`~noeta.errors.TaskAlreadyExistsError`.

So a timeout never leaves a task behind that the caller does not know about, and never makes a
second one.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.client import Client as TemporalClient
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.events import first_run_id
from noeta.client.projection.payloads import decode_first
from noeta.errors import TaskAlreadyExistsError, TemporalUnavailableError
from noeta.protocols.task import TaskInput
from noeta.security.history_codec import decode_message

logger = logging.getLogger(__name__)

#: How long one start request may wait for the server's answer before it is sent again.
ATTEMPT_TIMEOUT_SECONDS = 10.0
#: How long a start keeps trying before it gives up with TemporalUnavailableError.
START_RETRY_SECONDS = 120.0
#: Statuses after which a start's outcome is unknown or the server asked to come back: retried.
TRANSIENT = frozenset({
    RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED,
    RPCStatusCode.UNKNOWN, RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.ABORTED,
})

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("noeta_start_request_id", default=None)
_WRAPPED = "_noeta_request_ids"


def with_request_id(temporal: TemporalClient) -> None:
    """Make ``temporal``'s start requests carry the request id a :func:`start_workflow` call set
    (in a context variable) instead of the fresh one the SDK writes into each request. Every other
    call, and a start made outside :func:`start_workflow`, is sent unchanged."""
    service = temporal.workflow_service
    if getattr(service, _WRAPPED, False):
        return
    send = service.start_workflow_execution

    async def start_workflow_execution(req: StartWorkflowExecutionRequest, *args: Any, **kwargs: Any) -> Any:
        request_id = _REQUEST_ID.get()
        if request_id is not None:
            req.request_id = request_id
        return await send(req, *args, **kwargs)

    service.start_workflow_execution = start_workflow_execution  # type: ignore[method-assign]
    setattr(service, _WRAPPED, True)


#: Where temporalio's start_workflow marks a handle whose first workflow task came back with the
#: start (an eager start).
EAGERLY_STARTED = "__temporal_eagerly_started"


async def start_workflow(
    temporal: TemporalClient,
    task_input: TaskInput,
    task_id: str,
    send: Callable[..., Awaitable[Any]],
) -> bool:
    """Start ``task_id`` with ``task_input`` through ``send`` (``temporal.start_workflow`` with the
    task's other arguments bound), retrying transient failures with the same request id; returns
    once the task exists with this input (TaskAlreadyExistsError when it exists with another,
    TemporalUnavailableError when the server did not answer within START_RETRY_SECONDS): whether
    the server handed its first workflow task straight to a worker of this process (an eager
    start)."""
    with_request_id(temporal)
    token = _REQUEST_ID.set(uuid.uuid4().hex)
    loop = asyncio.get_running_loop()
    give_up = loop.time() + START_RETRY_SECONDS
    delay = 0.2
    try:
        while True:
            try:
                handle = await send(
                    id=task_id,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    rpc_timeout=timedelta(seconds=ATTEMPT_TIMEOUT_SECONDS),
                )
                return getattr(handle, EAGERLY_STARTED, False) is True
            except WorkflowAlreadyStartedError as err:
                await _same_start(temporal, task_input, task_id, err)
                return False
            except RPCError as err:
                if err.status not in TRANSIENT:
                    raise
                if loop.time() + delay >= give_up:
                    raise TemporalUnavailableError(
                        f"the start of task {task_id!r} got no answer from Temporal for {START_RETRY_SECONDS:.0f} s "
                        f"({err.message}); start it again with task_id={task_id!r}: if the task was created, "
                        "that start returns it"
                    ) from err
                logger.info("start of task %s: %s (%s); sending it again", task_id, err.status.name, err.message)
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 5.0)
    finally:
        _REQUEST_ID.reset(token)


async def existing_input(temporal: TemporalClient, task_id: str) -> TaskInput | None:
    """The input the task ``task_id`` was started with (its first run's), decoded."""
    handle = temporal.get_workflow_handle(task_id, run_id=await first_run_id(temporal, task_id))
    codec = temporal.data_converter.payload_codec
    async for event in handle.fetch_history_events(page_size=1):
        if codec is not None:
            await decode_message(event, codec)
        found: TaskInput | None = decode_first(event.workflow_execution_started_event_attributes.input, TaskInput)
        return found
    return None


async def _same_start(temporal: TemporalClient, task_input: TaskInput, task_id: str, err: Exception) -> None:
    """Return when the existing task ``task_id`` was started with ``task_input``; otherwise raise
    TaskAlreadyExistsError."""
    if await existing_input(temporal, task_id) == task_input:
        return
    raise TaskAlreadyExistsError(
        f"a task with id {task_id!r} exists and was started with another input (goal, options or "
        "task settings); choose another task_id, or read that task (result, events)",
        task_id,
    ) from err


__all__ = ["ATTEMPT_TIMEOUT_SECONDS", "START_RETRY_SECONDS", "TRANSIENT", "existing_input", "start_workflow",
           "with_request_id"]
