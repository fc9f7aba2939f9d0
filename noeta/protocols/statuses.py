"""Every status and verdict vocabulary, declared once as a ``Literal``: a type checker then catches a
misspelt value wherever one is produced or compared, and the runtime lists (``TASK_STATUSES``) are
derived from the same declaration."""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

GoalStatus = Literal["completed", "failed"]
"""How a goal ended (``Finish``, ``TaskResult``, the ``TaskCompleted`` event, ``QueryResult``):
when "failed", the answer holds the reason."""

GoalOutcome = Literal["completed", "failed", "interrupted"]
"""How a goal ended (``TaskResult.status``): as its policy finished it, or ``interrupted`` by a
message sent with ``if_busy="interrupt"`` (noeta.protocols.interaction.IfBusy)."""

IfBusy = Literal["enqueue", "reject", "interrupt", "steer"]
"""What a goal sent to a task that is working on another does (``send_goal(if_busy=...)``):
``enqueue`` waits for the running goal to end; ``reject`` refuses it (``TaskBusyError``);
``interrupt`` ends the running goal at once and starts with the transcript so far; ``steer`` adds
the message to the running goal before its next model call."""

IF_BUSY: tuple[IfBusy, ...] = get_args(IfBusy)


def ended_as(outcome: GoalOutcome) -> GoalStatus:
    """A task's (or run's) status from its last goal's outcome. An interrupted goal is never a
    task's last (the goal that interrupted it runs next), so it reads as completed."""
    return "failed" if outcome == "failed" else "completed"

ResultStatus = Literal["completed", "failed", "cancelled", "interrupted"]
"""The end of a goal in the message view (``Result``): a goal's own end (``interrupted`` by a newer
message among them), or its task cancelled."""

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
