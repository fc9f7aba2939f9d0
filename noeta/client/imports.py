"""Importing a task export into an installation (``noeta import FILE``): the export's bodies go into
this installation's content store (hash-checked), and the task becomes addressable here by id, so
``export``, ``replay`` and ``fork`` by id work as for a task of this cluster.

Temporal offers no way to write a workflow's history from outside, and running the task again would
ask the model and run the tools. An import therefore runs nothing of the task: it records, under the
task id, a workflow execution of type :data:`IMPORTED_WORKFLOW_NAME` that holds a reference to the
export (stored in the content store like any body) and ends as the recorded task ended: completed
with its recorded result, or failed. The client completes that execution itself (it answers the
execution's one workflow task on a task queue of its own), so no worker is involved. Reading the
task's record (``Client.export``, forking it) follows the reference to the stored export.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.api.command.v1 import (
    Command,
    CompleteWorkflowExecutionCommandAttributes,
    FailWorkflowExecutionCommandAttributes,
)
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import CommandType, EventType
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import PollWorkflowTaskQueueRequest, RespondWorkflowTaskCompletedRequest
from temporalio.client import Client as TemporalClient
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.export import LoadedTask, export_of, load_export
from noeta.client.forks import load_bodies
from noeta.context.content_store import ContentStore
from noeta.errors import TaskAlreadyExistsError, TaskNotFoundError
from noeta.protocols.ids import check_task_id

IMPORTED_WORKFLOW_NAME = "noeta.ImportedTask"
"""The workflow type of an imported task (its input: ``{"export": <sha256>, "source_task_id": ...}``)."""
EXPORT_MEDIA_TYPE = "application/vnd.noeta.task-export+json"


async def import_task(
    temporal: TemporalClient, store: ContentStore, export: bytes, task_id: str | None = None
) -> str:
    """Import ``export`` (an export's JSON text) as task ``task_id`` (default: the exported task's
    id) and return the id. ExportFormatError for what is not an export, TaskAlreadyExistsError when
    the id is taken here."""
    loaded = load_export(export)  # checks the format, the id, and each body it keeps against its hash
    task_id = check_task_id(task_id if task_id is not None else loaded.task_id)  # as strict as a start
    load_bodies(loaded, store)  # only the bodies its history refers to
    if loaded.ignored_bodies:  # the file carried others: what is kept of it is the export without them
        export = json.dumps(export_of(loaded.task_id, loaded.runs, loaded.store)).encode()
    ref = store.put(export, EXPORT_MEDIA_TYPE)
    queue = f"noeta-import-{uuid.uuid4().hex}"  # nobody else polls it: its one workflow task is ours
    try:
        await temporal.start_workflow(
            IMPORTED_WORKFLOW_NAME,
            {"export": ref.hash, "source_task_id": loaded.task_id},
            id=task_id,
            task_queue=queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError as err:
        raise TaskAlreadyExistsError(f"task {task_id!r} already exists here: import it under another id") from err
    await _end_as_recorded(temporal, queue, loaded)
    return task_id


async def _end_as_recorded(temporal: TemporalClient, queue: str, loaded: LoadedTask) -> None:
    """Answer the imported execution's workflow task: complete it with the recorded result, or
    fail it as the recorded task failed (or says how it ended)."""
    service, namespace = temporal.workflow_service, temporal.namespace
    task = await service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(namespace=namespace, task_queue=TaskQueue(name=queue), identity="noeta import")
    )
    last = loaded.runs[-1][-1]
    if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        result = Payloads()
        result.CopyFrom(last.workflow_execution_completed_event_attributes.result)
        codec = temporal.data_converter.payload_codec
        if codec is not None:  # the export holds payloads decoded; this installation may encrypt
            encoded = await codec.encode(list(result.payloads))
            del result.payloads[:]
            result.payloads.extend(encoded)
        command = Command(
            command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
            complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(result=result),
        )
    else:
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = last.workflow_execution_failed_event_attributes.failure
        else:
            name = EventType.Name(last.event_type).removeprefix("EVENT_TYPE_WORKFLOW_EXECUTION_").lower()
            failure = Failure(
                message=f"the exported task had not completed (its last event: {name})",
                application_failure_info=ApplicationFailureInfo(type="ImportedTaskNotCompleted", non_retryable=True),
            )
        command = Command(
            command_type=CommandType.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION,
            fail_workflow_execution_command_attributes=FailWorkflowExecutionCommandAttributes(failure=failure),
        )
    await service.respond_workflow_task_completed(
        RespondWorkflowTaskCompletedRequest(
            namespace=namespace, task_token=task.task_token, commands=[command], identity="noeta import"
        )
    )


async def imported_export(temporal: TemporalClient, store: ContentStore, task_id: str) -> dict[str, Any] | None:
    """The stored export of ``task_id`` when it is an imported task, else None (TaskNotFoundError
    for an unknown task)."""
    handle = temporal.get_workflow_handle(task_id)
    try:
        async for event in handle.fetch_history_events(page_size=1):
            started = event.workflow_execution_started_event_attributes
            if started.workflow_type.name != IMPORTED_WORKFLOW_NAME:
                return None
            (reference,) = await temporal.data_converter.decode(list(started.input.payloads), [dict])
            exported: dict[str, Any] = json.loads(store.get(reference["export"]))
            return exported
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFoundError(f"no task {task_id!r}") from err
        raise
    raise TaskNotFoundError(f"no task {task_id!r}")


async def imported_source(temporal: TemporalClient, store: ContentStore, source: str | LoadedTask) -> str | LoadedTask:
    """A fork's source: an imported task's stored export in place of its id, else ``source``."""
    if isinstance(source, LoadedTask):
        return source
    exported = await imported_export(temporal, store, source)
    return load_export(exported) if exported is not None else source


__all__ = ["EXPORT_MEDIA_TYPE", "IMPORTED_WORKFLOW_NAME", "import_task", "imported_export", "imported_source"]
