"""Workflow and update failures as the typed Noeta errors they carry."""

from __future__ import annotations

from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
)

from noeta.errors import NoetaError, TaskCancelledError, TaskFailedError, rebuild_error


def _run_ended_first(err: WorkflowUpdateFailedError) -> bool:
    """The update's run closed before the update finished (for a running task: continue-as-new)."""
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == "AcceptedUpdateCompletedWorkflow"


def translate_failure(err: BaseException) -> NoetaError:
    """A workflow/update failure as the typed Noeta error it carries."""
    cause = err.cause if isinstance(err, (WorkflowFailureError, WorkflowUpdateFailedError)) else err
    while isinstance(cause, (ActivityError, ChildWorkflowError)) and cause.cause is not None:
        cause = cause.cause  # an activity that failed for good: its own error says why
    if isinstance(cause, CancelledError):
        return TaskCancelledError("the task was cancelled")
    if isinstance(cause, TerminatedError):
        return TaskFailedError(f"the task was terminated: {cause.message}")
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else None
        rebuilt = rebuild_error(cause.type, cause.message, details)
        if rebuilt is not None:
            return rebuilt
        return TaskFailedError(f"{cause.type or 'error'}: {cause.message}")
    return TaskFailedError(str(cause or err))
