"""Every status and verdict vocabulary, declared once as a ``Literal``: a type checker then catches a
misspelt value wherever one is produced or compared, and the runtime lists (``TASK_STATUSES``) are
derived from the same declaration."""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

GoalStatus = Literal["completed", "failed"]
"""How a goal ended (``Finish``, ``TaskResult``, the ``TaskCompleted`` event, ``QueryResult``):
when "failed", the answer holds the reason."""

ResultStatus = Literal["completed", "failed", "cancelled"]
"""The end of a goal in the message view (``Result``): a goal's own end, or its task cancelled."""

TaskStatus = Literal["running", "idle", "awaiting_approval", "completed", "failed", "cancelled", "terminated", "timed_out"]
"""A task's NoetaStatus: ``running``, ``idle`` (keep-open, between goals), ``awaiting_approval`` while
open; ``completed``, ``failed``, ``cancelled`` (and, for tasks ended from outside, ``terminated``,
``timed_out``) after."""

TASK_STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
OPEN_TASK_STATUSES: tuple[TaskStatus, ...] = ("running", "idle", "awaiting_approval")
"""The statuses of a task that is still open."""

RunEnd = Literal["completed", "failed", "cancelled", "continued_as_new"]
"""How one workflow run ended (the ``noeta_tasks_finished`` metric's label)."""

Verdict = Literal["allow", "deny", "ask"]
"""A guard's verdict on a proposed action: ``deny`` refuses it, ``ask`` holds it for a human."""

ApprovalDecision = Literal["approved", "refused"]
"""A human's answer to an approval request (the ``noeta_approvals_decided`` metric's label)."""

CallOutcome = Literal["ok", "error"]
"""How one observed call ended (resource calls, lifecycle hooks)."""


def is_task_status(value: object) -> TypeGuard[TaskStatus]:
    """Whether ``value`` (e.g. read back from a search attribute) is a NoetaStatus."""
    return value in TASK_STATUSES


__all__ = [
    "ApprovalDecision", "CallOutcome", "GoalStatus", "OPEN_TASK_STATUSES", "ResultStatus", "RunEnd",
    "TASK_STATUSES", "TaskStatus", "Verdict", "is_task_status",
]
