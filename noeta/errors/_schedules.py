"""Errors a client meets managing schedules (``Client.create_schedule`` and the calls beside it)."""

from __future__ import annotations

from noeta.errors._base import NoetaError


class ScheduleNotFoundError(NoetaError):
    """No schedule with that id exists (or it is another tenant's): ``list_schedules`` lists those
    there are."""


class ScheduleAlreadyExistsError(NoetaError):
    """A schedule was created with the id of one that exists: choose another id, or change the
    existing one (pause, unpause, or delete it and create it again)."""

    _detail_defaults = {"schedule_id": ""}

    def __init__(self, message: str, schedule_id: str = "") -> None:
        """``schedule_id``: the id that is taken."""
        super().__init__(message)
        self.schedule_id = schedule_id
        """The id of the existing schedule."""
