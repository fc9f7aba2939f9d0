"""Errors a client meets reaching a task: the cluster, the task itself and how it ended."""

from __future__ import annotations

from typing import Any

from noeta.errors._base import NoetaError


class ApprovalNotPendingError(NoetaError):
    """An approval names an action that is not waiting for one (unknown, or already decided)."""


class TaskNotFoundError(NoetaError):
    """No task with that id exists on the Temporal cluster."""


class TaskAlreadyExistsError(NoetaError):
    """A task was started with the id of a task that exists (running or ended) and a different
    input: a start of the same id with the same input returns that task instead (so a retried
    start never makes a second task). Pick another id, or read the existing task."""

    _detail_defaults = {"task_id": ""}

    def __init__(self, message: str, task_id: str = "") -> None:
        """``task_id``: the id that is taken."""
        super().__init__(message)
        self.task_id = task_id
        """The id of the existing task."""


class TaskNotOpenError(NoetaError):
    """A goal was sent to a task that has ended or was not started with ``keep_open=True``."""


class TaskBusyError(NoetaError):
    """A goal sent with ``if_busy="reject"`` found the task working on another goal; nothing was
    sent (send it again later, or with ``if_busy="enqueue"``, ``"interrupt"`` or ``"steer"``)."""


class ExportFormatError(NoetaError, ValueError):
    """What was given as a task export is not one (``Client.export`` writes them): not a mapping,
    another format, or a history that does not decode."""


class TurnNotFoundError(NoetaError, ValueError):
    """A turn was named that the task has not recorded (forking at a turn that does not exist);
    the message names the valid range."""

    def __init__(self, message: str, task_id: str = "", valid: range = range(0)) -> None:
        """``valid``: the turns the task has recorded (empty: none yet)."""
        super().__init__(message)
        self.task_id = task_id
        """The task that was asked for the turn."""
        self.valid = valid
        """The turns it has recorded, as a range (1..n)."""

    def to_details(self) -> dict[str, Any]:
        """The message, the task and the valid turns (``first_turn``..``last_turn``; none: 0, 0)."""
        last = self.valid.stop - 1 if self.valid else 0
        return {"message": str(self), "task_id": self.task_id, "first_turn": self.valid.start if self.valid else 0,
                "last_turn": last}


class TaskCancelledError(NoetaError):
    """The task was cancelled before it produced a result."""


class TaskFailedError(NoetaError):
    """The task's workflow failed for a reason without a more specific Noeta error type."""


class TemporalUnavailableError(NoetaError):
    """The configured Temporal cluster (TEMPORAL_ADDRESS) cannot be reached."""


class ServerStartError(NoetaError):
    """The embedded Temporal dev server could not be started."""
