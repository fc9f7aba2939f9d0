"""A step no worker could run: a failed workflow task becomes a ``TaskStalled`` envelope.

Temporal records the first failure of a workflow task (later attempts of the same task are not
written to history), so a task stuck on a worker that cannot run it shows one ``TaskStalled`` with
the error the worker reported, e.g. an ``EncryptionKeyError`` naming the key the worker lacks.
Workflow tasks that fail for Temporal's own bookkeeping (an update or signal that arrived while a
step ran) are not stalls.
"""

from __future__ import annotations

import json
import re

from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.payloads import own_error_type
from noeta.protocols import event_log as ev

#: Causes that mean the worker could not run the step (its code or its data failed).
_STALL_CAUSES = frozenset({
    WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE,
    WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR,
})
_KEY_ID = re.compile(r"key '([^']+)'")


def _message(failure: Failure) -> str:
    """The failure's message, also when a codec moved it into its encoded attributes."""
    if failure.HasField("encoded_attributes"):
        try:
            attributes = json.loads(failure.encoded_attributes.data)
        except ValueError:  # still sealed: the reader lacks the key the worker encoded it with
            return failure.message
        message = attributes.get("message") if isinstance(attributes, dict) else None
        if isinstance(message, str):
            return message
    return failure.message


def stall_of(event: HistoryEvent) -> ev.TaskStalled | None:
    """The ``TaskStalled`` of a WorkflowTaskFailed event, None when it is no stall."""
    attrs = event.workflow_task_failed_event_attributes
    if attrs.cause not in _STALL_CAUSES:
        return None
    failure = attrs.failure
    while failure.HasField("cause"):  # the SDK's "Failed decoding arguments" wraps the reason
        failure = failure.cause
    error_type = own_error_type(failure)
    message = _message(failure)
    key = _KEY_ID.search(message) if error_type == "EncryptionKeyError" else None
    return ev.TaskStalled(error_type=error_type, message=message, key_id=key.group(1) if key else None)


__all__ = ["stall_of"]
