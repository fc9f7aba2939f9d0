"""Task operations: start a task, send it goals and context, answer its approvals, wait for its
result, close or cancel it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.connection import Connection
from noeta.client.failures import _run_ended_first, translate_failure
from noeta.client.export import LoadedTask
from noeta.client.forks import fork_input, source_record
from noeta.client.observation import Observation
from noeta.client.options import Options, build_task_input
from noeta.client.pollers import saying_when_unpolled
from noeta.client.start_request import StartAs, workflow_start
from noeta.client.starts import start_workflow
from noeta.client.task_input import check_goal, check_if_busy, task_provider_name
from noeta.errors import ConfigurationError, NoetaError, PayloadTooLargeError, TaskFailedError, TaskNotFoundError
from noeta.protocols.interaction import ApprovalInput, GoalInput, InjectInput, TaskResult
from noeta.protocols.statuses import IfBusy
from noeta.protocols.messages import ImageBlock
from noeta.protocols.names import (
    SIGNAL_CLOSE,
    SIGNAL_INJECT,
    UPDATE_APPROVE,
    UPDATE_REFUSE,
    UPDATE_SEND_GOAL,
)
from noeta.protocols.event_log import Observer
from noeta.protocols.identity import parse_identity
from noeta.protocols.ids import check_task_id
from noeta.protocols.task import MAX_INJECTION_CHARS, TaskInput

logger = logging.getLogger(__name__)

#: How long ``AsyncClient.result`` keeps waiting while the Temporal server cannot be reached.
SERVER_OUTAGE_WAIT_SECONDS = 600.0
#: RPC statuses that mean "the server is not reachable right now" (not "your request is wrong").
SERVER_UNREACHABLE = frozenset({RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNKNOWN})


def task_id_or_new(task_id: str | None) -> str:
    """The caller's task id, checked (ConfigurationError for an empty or odd one), or a new one."""
    return f"task-{uuid.uuid4().hex[:12]}" if task_id is None else check_task_id(task_id)


class TaskOperations:
    """What a client does to tasks, on its connection; the tasks it starts go to ``task_queue``
    unless told otherwise, and ``observation`` follows them for the client's observers.
    :class:`~noeta.client.client.AsyncClient` documents each operation, and its arguments' defaults
    are the only ones: this class is handed every argument."""

    def __init__(
        self,
        connection: Connection,
        observation: Observation,
        *,
        task_queue: str,
        indexed_metadata: Sequence[str] = (),
    ) -> None:
        """``indexed_metadata``: the ``Options.metadata`` keys that tasks started here make searchable."""
        self.connection = connection
        self.observation = observation
        self.task_queue = task_queue
        self._indexed_metadata = tuple(indexed_metadata)

    @property
    def indexed_metadata(self) -> tuple[str, ...]:
        """``Options.metadata`` keys that tasks started here make searchable."""
        return self._indexed_metadata

    @indexed_metadata.setter
    def indexed_metadata(self, keys: Sequence[str]) -> None:
        self._indexed_metadata = tuple(keys)

    async def start(
        self,
        goal: str,
        options: Options | None,
        *,
        task_id: str | None,
        keep_open: bool,
        images: Sequence[ImageBlock],
        workspace_dir: str | Path | None,
        provider_name: str | None,
        start_as: StartAs,
    ) -> str:
        """Start a task's workflow and return the task id (every argument as AsyncClient.start's,
        whose defaults are the only ones)."""
        options = options or Options()
        if provider_name is None:
            provider_name = task_provider_name(options.provider)
        task_id = task_id_or_new(task_id)
        task_input = build_task_input(
            options,
            goal,
            provider_name=provider_name,
            keep_open=keep_open,
            images=images,
            workspace_dir=workspace_dir,
            task_id=task_id,
        )
        return await self.launch(task_input, task_id, start_as, observers=options.observers)

    async def launch(
        self,
        task_input: TaskInput,
        task_id: str,
        start_as: StartAs,
        *,
        observers: Sequence[Observer] = (),
        forked_from: str | None = None,
    ) -> str:
        """Start the workflow of a built ``task_input`` as ``task_id`` (indexed where the cluster
        has the search attributes; ``forked_from``: the task a fork was taken from)."""
        check_task_id(task_id)
        connection = self.connection
        start = await workflow_start(
            connection, task_input, start_as, task_queue=self.task_queue, indexed_metadata=self.indexed_metadata,
            forked_from=forked_from,
        )
        task_input = start.task_input
        send = functools.partial(
            connection.acting_as(start_as.identity).start_workflow,
            start.workflow,
            task_input,
            **start.request_options(),
            # Taken up only when a worker on this client polls the queue with a free slot (the
            # SDK drops the request otherwise): the first workflow task comes back with the start.
            request_eager_start=True,
        )
        if await start_workflow(connection.temporal, task_input, task_id, send):
            logger.debug("task %s: its first workflow task came back with the start (eager)", task_id)
        connection.started(task_id, start.task_queue)
        self.observation.follow(task_id, observers)
        return task_id

    async def fork(
        self,
        source: str | LoadedTask,
        *,
        at_turn: int,
        options: Options | None,
        goal: str | None,
        task_id: str | None,
        start_as: StartAs,
    ) -> str:
        """Start a fork of ``source`` at its turn ``at_turn`` (every argument as AsyncClient.fork's,
        whose defaults are the only ones); it runs on the source's queue unless ``start_as`` names
        one, and belongs to the source's tenant unless ``start_as`` names one."""
        if not isinstance(at_turn, int) or isinstance(at_turn, bool):
            raise ConfigurationError(f"at_turn must be a turn number (an int from 1), got {at_turn!r}")
        if isinstance(source, LoadedTask):  # an export: its bodies are in this installation's store
            record, source_queue, source_id = source.recorded(), "", source.task_id
        else:
            record, source_queue = await source_record(self.connection.temporal, source)
            source_id = source
            if start_as.tenant is None:  # a fork is its source's tenant's, whoever starts it
                start_as = dataclasses.replace(start_as, tenant=await self.connection.tenant_of(source))
        task_id = task_id_or_new(task_id)
        task_input = fork_input(record, source_id, at_turn, options, goal, task_id)
        start_as = dataclasses.replace(start_as, task_queue=start_as.task_queue or source_queue or None)
        observers = options.observers if options is not None else ()
        return await self.launch(task_input, task_id, start_as, observers=observers, forked_from=source_id)

    async def send_goal(
        self, task_id: str, goal: str, images: Sequence[ImageBlock], identity: str | None,
        if_busy: IfBusy = "enqueue", goal_id: str | None = None,
    ) -> TaskResult:
        """Send a keep-open task its next goal (as an update, from ``identity``; ``if_busy``: what it
        does while another goal runs) and return the result that answers it."""
        check_goal(goal)
        check_if_busy(if_busy)
        request = GoalInput(goal=goal, images=list(images), goal_id=goal_id or uuid.uuid4().hex, if_busy=if_busy)
        connection = self.connection
        while True:
            handle = connection.acting_as(identity).get_workflow_handle(task_id)  # the task's current run
            try:
                async with connection.reaching(task_id), self.waiting(task_id):
                    result: TaskResult = await handle.execute_update(UPDATE_SEND_GOAL, request, result_type=TaskResult)
                return result
            except WorkflowUpdateFailedError as err:
                if _run_ended_first(err) and await connection.is_running(task_id):
                    continue  # the task continued as new: follow the goal (same goal_id) into the new run
                failure = translate_failure(err)
                if isinstance(failure, TaskFailedError) and not await connection.is_running(task_id):
                    # The task failed while working on this goal: the update only says "the workflow
                    # completed"; the task's own error says why.
                    try:
                        await self.result(task_id)
                    except NoetaError as real:
                        raise real from err
                raise failure from err

    async def inject(self, task_id: str, text: str, origin: str, identity: str | None) -> None:
        """Signal host context to a task for the model's next step (from ``identity``)."""
        if origin not in ("system", "memory"):
            raise ConfigurationError(f"origin must be 'system' or 'memory', got {origin!r}")
        if not text.strip():
            raise ConfigurationError("injected text must not be empty")
        if len(text) > MAX_INJECTION_CHARS:
            raise PayloadTooLargeError(
                f"injected text has {len(text)} characters; the limit is {MAX_INJECTION_CHARS}. Put large "
                "documents in a content channel or behind a tool"
            )
        async with self.connection.reaching(task_id):
            handle = self.connection.acting_as(identity).get_workflow_handle(task_id)
            await handle.signal(SIGNAL_INJECT, InjectInput(text, origin))  # type: ignore[arg-type]

    async def close_task(self, task_id: str, identity: str | None) -> None:
        """Signal a keep-open task to end after its queued goals (from ``identity``)."""
        async with self.connection.reaching(task_id):
            await self.connection.acting_as(identity).get_workflow_handle(task_id).signal(SIGNAL_CLOSE)

    async def approve(
        self, task_id: str, call_id: str, approved: bool, reason: str | None, approver: str | None,
        arguments: dict[str, Any] | None,
    ) -> None:
        """Answer (as an update whose caller identity is ``approver``: that is what the task
        records as the approver) an action a guard sent for approval; ``arguments`` approves the
        call with these arguments instead of the proposed ones."""
        if not call_id or not isinstance(call_id, str):
            raise ConfigurationError("call_id must be a non-empty string")
        if arguments is not None and (not approved or not isinstance(arguments, dict)):
            raise ConfigurationError("arguments (a JSON object) can only be given with an approval")
        handle = self.connection.acting_as(approver).get_workflow_handle(task_id)
        try:
            async with self.connection.reaching(task_id):
                # The name rides along for the model's feedback ("Not approved by ..."); the record
                # takes the approver from the update's caller identity. Two update names, so the
                # Temporal UI's timeline shows which answer it was.
                name = parse_identity(approver)[0] if approver else None
                update = UPDATE_APPROVE if approved else UPDATE_REFUSE
                await handle.execute_update(update, ApprovalInput(call_id, approved, reason, name, arguments))
        except WorkflowUpdateFailedError as err:
            raise translate_failure(err) from err

    async def result(self, task_id: str) -> TaskResult:
        """Wait for the task's workflow result, through a server outage of up to
        SERVER_OUTAGE_WAIT_SECONDS, saying when no worker polls the task's queue."""
        async with self.waiting(task_id):
            return await self._result(task_id)

    def waiting(self, task_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Around a wait for the task: the no-worker and stall notices (noeta.client.pollers)."""
        return saying_when_unpolled(self.connection.temporal, task_id, queue=self.connection.started_on(task_id))

    async def _result(self, task_id: str) -> TaskResult:
        handle = self.connection.temporal.get_workflow_handle(task_id, result_type=TaskResult)
        loop = asyncio.get_running_loop()
        gave_up_at: float | None = None
        delay = 0.5
        while True:
            try:
                result: TaskResult = await handle.result()
                return result
            except WorkflowFailureError as err:
                raise translate_failure(err) from err
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise TaskNotFoundError(f"no task {task_id!r}") from err
                if err.status not in SERVER_UNREACHABLE:
                    raise
                gave_up_at = gave_up_at or loop.time() + SERVER_OUTAGE_WAIT_SECONDS
                if loop.time() >= gave_up_at:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def cancel(self, task_id: str, identity: str | None) -> None:
        """Request cancellation of a running task's workflow (from ``identity``)."""
        await self.connection.require_running(task_id)
        async with self.connection.reaching(task_id):
            await self.connection.acting_as(identity).get_workflow_handle(task_id).cancel()
