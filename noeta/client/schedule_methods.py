"""The client's schedule calls (``AsyncClient.create_schedule`` and the calls beside it): a part of
:class:`~noeta.client.client.AsyncClient`, which forwards them here, each handed to
:class:`~noeta.client.schedules.ScheduleOperations` on the client's connection. docs/schedules.md."""

from __future__ import annotations

from datetime import datetime, timedelta

from typing_extensions import Unpack

from noeta.client.connection import Connection
from noeta.client.listing import TaskListing
from noeta.client.options import Options
from noeta.client.schedule_info import ScheduleInfo
from noeta.client.schedule_spec import DEFAULT_OVERLAP, Timing
from noeta.client.schedules import ScheduleOperations
from noeta.client.start_request import StartAs, StartKeywords
from noeta.client.tasks import TaskOperations
from noeta.client.visibility import TaskFilter, TaskSummary


class ScheduleCalls:
    """Schedules of tasks on the client's cluster: each run is an ordinary task, started as
    ``start`` starts one, whose id is the schedule's id and the run's time."""

    def __init__(self, connection: Connection, tasks: TaskOperations, listing: TaskListing) -> None:
        """Schedules on ``connection``, their runs started as ``tasks`` starts and found by ``listing``."""
        self._schedules = ScheduleOperations(connection, tasks)
        self._listing = listing

    async def create_schedule(
        self,
        schedule_id: str,
        goal: str,
        options: Options | None = None,
        *,
        cron: str | None = None,
        every: timedelta | float | str | None = None,
        timezone: str | None = None,
        overlap: str = DEFAULT_OVERLAP,
        catchup_window: timedelta | float | str | None = None,
        jitter: timedelta | float | str | None = None,
        paused: bool = False,
        note: str | None = None,
        provider_name: str | None = None,
        **start_as: Unpack[StartKeywords],
    ) -> str:
        """Start ``goal`` with ``options`` as a new task on a clock, and return the schedule's id.
        Exactly one of ``cron`` (``"0 8 * * MON-FRI"``, in ``timezone``, an IANA name; default
        UTC) and ``every`` (a timedelta, seconds, or ``"10s"``, ``"5m"``, ``"2h"``, ``"1d"``).
        ``overlap``: what happens when a run is due while the last one runs (``skip``,
        ``buffer_one``, ``buffer_all``, ``cancel_other``, ``terminate_other``, ``allow_all``).
        ``catchup_window``: how long after an outage a missed run is still started (default:
        Temporal's, a year); ``jitter``: each run starts up to this much later, at random.
        ``paused``: create it paused (``note`` says why). ``start_as`` (``task_queue``,
        ``api_key_id``, ``tenant``, ``identity``): as for ``start``; every run is a task of ``tenant``.
        ConfigurationError (or the error ``start`` raises for the goal and options) before anything
        is created; ScheduleAlreadyExistsError when the id is taken."""
        timing = Timing.checked(
            cron=cron, every=every, timezone=timezone, overlap=overlap, catchup_window=catchup_window, jitter=jitter,
        )
        return await self._schedules.create(
            schedule_id, goal, options, timing=timing, paused=paused, note=note, provider_name=provider_name,
            start_as=StartAs.given(start_as),
        )

    async def list_schedules(self, limit: int = 100, *, tenant: str | None = None) -> list[ScheduleInfo]:
        """The schedules of tasks (of ``tenant``), by id: timing, paused, next and recent runs.
        The cluster's listing lags a moment behind a change."""
        return await self._schedules.list(tenant, limit)

    async def describe_schedule(self, schedule_id: str, *, tenant: str | None = None) -> ScheduleInfo:
        """The schedule as it is now: timing, policies, paused, its next run times, its recent runs
        (their task ids) and those still running. ScheduleNotFoundError for an unknown id (or
        another ``tenant``'s schedule)."""
        return await self._schedules.describe(schedule_id, tenant)

    async def pause_schedule(
        self, schedule_id: str, note: str | None = None, *, tenant: str | None = None, identity: str | None = None
    ) -> None:
        """Start no run until ``unpause_schedule`` (running runs go on); ``note`` says why."""
        await self._schedules.pause(schedule_id, True, note, tenant, identity)

    async def unpause_schedule(
        self, schedule_id: str, note: str | None = None, *, tenant: str | None = None, identity: str | None = None
    ) -> None:
        """Let a paused schedule run again from its next due time (runs due while it was paused
        are not started: ``backfill_schedule`` starts them)."""
        await self._schedules.pause(schedule_id, False, note, tenant, identity)

    async def trigger_schedule(
        self, schedule_id: str, *, overlap: str | None = None, tenant: str | None = None, identity: str | None = None
    ) -> None:
        """Start a run now, besides the schedule's own (``overlap``: instead of its policy, for
        this run); it shows in ``describe_schedule``'s recent runs within a moment."""
        await self._schedules.trigger(schedule_id, overlap, tenant, identity)

    async def backfill_schedule(
        self, schedule_id: str, start: datetime, end: datetime, *, overlap: str | None = None,
        tenant: str | None = None, identity: str | None = None,
    ) -> None:
        """Start the runs that were due between ``start`` and ``end`` (naive times are UTC), as the
        schedule's overlap policy (or ``overlap``) allows: after a pause, or an outage longer than
        the catch-up window."""
        await self._schedules.backfill(schedule_id, start, end, overlap, tenant, identity)

    async def delete_schedule(self, schedule_id: str, *, tenant: str | None = None, identity: str | None = None) -> None:
        """Delete the schedule; the tasks it started stay (``schedule_runs`` still finds them)."""
        await self._schedules.delete(schedule_id, tenant, identity)

    async def schedule_runs(self, schedule_id: str, limit: int = 50, *, tenant: str | None = None) -> list[TaskSummary]:
        """The tasks a schedule started (also after it was deleted), newest first, from the
        cluster's visibility store (which lags a moment behind)."""
        return await self._listing.list_tasks(TaskFilter(tenant=tenant, schedule=schedule_id), limit)


__all__ = ["ScheduleCalls"]
