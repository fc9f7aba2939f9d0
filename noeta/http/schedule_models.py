"""The request and response bodies of the schedule endpoints (:mod:`noeta.http.schedule_routes`),
as pydantic models for FastAPI and the OpenAPI document. A schedule's answer has the fields of
:class:`~noeta.client.schedule_info.ScheduleInfo`, derived from it, and each recent run its task's
UI page."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, create_model

from noeta.client.schedule_info import ScheduleInfo, ScheduleRun
from noeta.client.schedule_spec import DEFAULT_OVERLAP, Overlap
from noeta.http.models import Request, Response, TaskOptions, response_fields

#: A duration: seconds, or text such as "10s", "5m", "2h", "1d".
Duration = StrictInt | StrictFloat | StrictStr


class CreateSchedule(Request):
    """A goal started as an ordinary task on a clock: exactly one of ``cron`` and ``every``."""
    schedule_id: StrictStr = Field(description="the schedule's id; each run's task id is it and the run's time")
    goal: StrictStr = Field(description="the goal every run starts with")
    options: TaskOptions | None = None
    cron: StrictStr | None = Field(default=None, description="e.g. '0 8 * * MON-FRI' (weekdays at 08:00 in timezone)")
    every: Duration | None = Field(default=None, description="the interval: seconds, or '10s', '5m', '2h', '1d'")
    timezone: StrictStr | None = Field(default=None, description="IANA name for cron, e.g. 'Europe/Berlin' (default UTC)")
    overlap: Overlap = Field(default=DEFAULT_OVERLAP, description="what a run due while the last one runs does")
    catchup_window: Duration | None = Field(
        default=None, description="how long after an outage a missed run still starts (default: Temporal's, a year)"
    )
    jitter: Duration | None = Field(default=None, description="each run starts up to this much later, at random")
    paused: StrictBool = False
    note: StrictStr | None = Field(default=None, description="why it is created paused")
    task_queue: StrictStr | None = Field(default=None, description="default: the server's (NOETA_TASK_QUEUE)")


class ScheduleNote(Request):
    """Why a schedule is paused or unpaused (shown with it)."""
    note: StrictStr | None = None


class TriggerSchedule(Request):
    """Start a run now."""
    overlap: Overlap | None = Field(default=None, description="instead of the schedule's policy, for this run")


class BackfillSchedule(Request):
    """Start the runs that were due between ``start`` and ``end`` (ISO 8601; without an offset: UTC)."""
    # Not strict: JSON has no datetime, so the strict model would refuse every ISO 8601 text.
    start: datetime = Field(strict=False, description="e.g. 2026-12-01T00:00:00Z")
    end: datetime = Field(strict=False, description="e.g. 2026-12-07T00:00:00Z")
    overlap: Overlap | None = Field(default=None, description="instead of the schedule's policy, for these runs")


class ScheduleRef(Response):
    """The schedule an operation applies to."""
    schedule_id: str


# Derived from the client's dataclasses (type checkers see Response).
if TYPE_CHECKING:
    _Run = Response
    _Schedule = Response
else:
    _Run = create_model("ScheduleRunFields", __base__=Response, **response_fields(ScheduleRun))
    _Schedule = create_model(
        "ScheduleFields", __base__=Response, **{k: v for k, v in response_fields(ScheduleInfo).items() if k != "recent_runs"}
    )


class ScheduleRunOut(_Run):
    """A task a schedule started, and its Temporal UI page."""
    ui_url: str | None = Field(default=None, description="the task's page in the Temporal UI")


class ScheduleOut(_Schedule):
    """A schedule: goal, timing, paused, next run times and the tasks it started last."""
    recent_runs: list[ScheduleRunOut] = Field(default_factory=list, description="the tasks it started last, oldest first")


__all__ = ["BackfillSchedule", "CreateSchedule", "Duration", "ScheduleNote", "ScheduleOut", "ScheduleRef",
           "ScheduleRunOut", "TriggerSchedule"]
