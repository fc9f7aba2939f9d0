"""Schedules: a goal started as an ordinary task on a clock (Temporal Schedules), and what can be
done to a schedule (list, describe, pause, unpause, trigger, backfill, delete). docs/schedules.md.

A schedule's action is the very start a task gets from ``Client.start`` (built by
:func:`~noeta.client.start_request.workflow_start`: input, workflow type, queue, summary,
details, tenant and API key), with the schedule's id as the workflow id prefix: Temporal appends
each run's scheduled time (``triage-2026-12-07T08:00:00Z``) and sets ``TemporalScheduledById`` on
the run, which Noeta reads as the task's schedule. A schedule belongs to the tenant that created
it (NoetaTenant on the schedule and on each run); the calls below that take ``tenant`` treat
another tenant's schedule as one that does not exist.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timezone

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleHandle,
    ScheduleState,
)
from temporalio.common import TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.connection import Connection
from noeta.client.options import Options, build_task_input
from noeta.client.schedule_info import ScheduleInfo, described, listed, runs_tasks
from noeta.client.schedule_spec import OVERLAP_POLICIES, OVERLAPS, Timing
from noeta.client.start_request import StartAs, workflow_start
from noeta.client.task_input import task_provider_name
from noeta.client.tasks import TaskOperations
from noeta.client.visibility import tenant_filter
from noeta.errors import ConfigurationError, ScheduleAlreadyExistsError, ScheduleNotFoundError
from noeta.protocols.ids import MAX_ID_CHARS, check_task_id
from noeta.protocols.names import SA_TENANT, SCHEDULE_MEMO_KEY

#: What Temporal appends to the schedule's id in each run's task id: ``-2026-12-07T08:00:00Z``.
RUN_SUFFIX_CHARS = len("-2026-12-07T08:00:00Z")
MAX_SCHEDULE_ID_CHARS = MAX_ID_CHARS - RUN_SUFFIX_CHARS


def check_schedule_id(schedule_id: object) -> str:
    """``schedule_id`` if it is a valid schedule id: a task id's characters, short enough that each
    run's task id (the schedule's id and its time) is one too."""
    value = check_task_id(schedule_id)
    if len(value) > MAX_SCHEDULE_ID_CHARS:
        raise ConfigurationError(f"schedule_id has {len(value)} characters; at most {MAX_SCHEDULE_ID_CHARS} are allowed")
    return value


def _not_found(schedule_id: str) -> ScheduleNotFoundError:
    return ScheduleNotFoundError(f"no schedule {schedule_id!r}; list_schedules (noeta schedule list) lists those there are")


def _overlap(name: str | None) -> object:
    if name is None:
        return None
    if name not in OVERLAPS:
        raise ConfigurationError(f"unknown overlap {name!r}: one of {', '.join(OVERLAPS)}")
    return OVERLAP_POLICIES[name]


class ScheduleOperations:
    """What a client does to schedules, on its connection; runs start as ``tasks`` starts tasks
    (on its task queue unless the schedule names one, with its indexed metadata keys)."""

    def __init__(self, connection: Connection, tasks: TaskOperations) -> None:
        """``tasks``: the client's task operations, whose queue and indexed keys runs take."""
        self.connection = connection
        self.tasks = tasks

    async def create(
        self, schedule_id: str, goal: str, options: Options | None, *, timing: Timing, paused: bool,
        note: str | None, provider_name: str | None, start_as: StartAs,
    ) -> str:
        """Create the schedule (every argument as AsyncClient.create_schedule's); returns its id.
        Everything is checked before the schedule exists."""
        check_schedule_id(schedule_id)
        options = options or Options()
        if options.observers:
            raise ConfigurationError(
                "Options.observers cannot follow a schedule's runs (they start later, maybe in another process): "
                "follow a run with client.observe(task_id), or read its events"
            )
        task_input = build_task_input(
            options, goal, provider_name=provider_name or task_provider_name(options.provider), task_id=schedule_id,
        )
        start = await workflow_start(
            self.connection, task_input, start_as, task_queue=self.tasks.task_queue,
            indexed_metadata=self.tasks.indexed_metadata, schedule_id=schedule_id,
        )
        attributes = start.search_attributes or TypedSearchAttributes.empty
        action = ScheduleActionStartWorkflow(
            start.workflow, start.task_input, id=schedule_id, task_queue=start.task_queue,
            static_summary=start.static_summary, static_details=start.static_details,
            typed_search_attributes=attributes, priority=start.priority,
        )
        schedule = Schedule(
            action=action, spec=timing.spec(), policy=timing.policy(), state=ScheduleState(paused=paused, note=note),
        )
        tenant = [pair for pair in attributes if pair.key.name == SA_TENANT]  # the schedule's own, for listing
        try:
            await self.connection.acting_as(start_as.identity).create_schedule(
                schedule_id, schedule, memo={SCHEDULE_MEMO_KEY: timing.to_memo(goal)},
                search_attributes=TypedSearchAttributes(tenant),
            )
        except ScheduleAlreadyRunningError as err:
            raise ScheduleAlreadyExistsError(
                f"a schedule with id {schedule_id!r} exists; choose another id, or delete that schedule first "
                "(describe_schedule shows it)", schedule_id,
            ) from err
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT:  # e.g. a cron field out of range
                raise ConfigurationError(f"the schedule was refused: {err.message}") from err
            raise
        return schedule_id

    async def list(self, tenant: str | None, limit: int) -> list[ScheduleInfo]:
        """The schedules of Noeta tasks (of ``tenant``, when given), at most ``limit``, by id."""
        query = None
        if tenant is not None:
            query = tenant_filter(await self.connection.registered_attributes(), tenant).removeprefix(" AND ") or None
        found = []
        async for item in await self.connection.temporal.list_schedules(query):
            if runs_tasks(item):
                found.append(await listed(item))
            if len(found) >= limit:
                break
        return sorted(found, key=lambda s: s.schedule_id)

    async def describe(self, schedule_id: str, tenant: str | None) -> ScheduleInfo:
        """The schedule as it is now; ScheduleNotFoundError when there is none (of ``tenant``)."""
        async with self._reaching(schedule_id):
            desc = await self.connection.temporal.get_schedule_handle(schedule_id).describe()
        info = await described(desc) if runs_tasks(desc) else None
        if info is None or (tenant is not None and info.tenant != tenant):
            raise _not_found(schedule_id)
        return info

    async def pause(self, schedule_id: str, pausing: bool, note: str | None, tenant: str | None,
                    identity: str | None) -> None:
        """Pause the schedule (no run starts until it is unpaused) or, ``pausing`` false, unpause it."""
        handle = await self._handle(schedule_id, tenant, identity)
        async with self._reaching(schedule_id):
            if pausing:
                await handle.pause(note=note or "paused")
            else:
                await handle.unpause(note=note or "unpaused")

    async def trigger(self, schedule_id: str, overlap: str | None, tenant: str | None, identity: str | None) -> None:
        """Start a run now (``overlap``: instead of the schedule's policy, for this run)."""
        policy = _overlap(overlap)
        handle = await self._handle(schedule_id, tenant, identity)
        async with self._reaching(schedule_id):
            await handle.trigger(overlap=policy)  # type: ignore[arg-type]  # checked by _overlap

    async def backfill(self, schedule_id: str, start: datetime, end: datetime, overlap: str | None,
                       tenant: str | None, identity: str | None) -> None:
        """Start the runs that were due from ``start`` to ``end`` (naive times are UTC)."""
        policy = _overlap(overlap)
        start, end = (t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc) for t in (start, end))
        if start >= end:
            raise ConfigurationError(f"a backfill's start ({start.isoformat()}) must be before its end ({end.isoformat()})")
        handle = await self._handle(schedule_id, tenant, identity)
        async with self._reaching(schedule_id):
            await handle.backfill(ScheduleBackfill(start, end, policy))  # type: ignore[arg-type]

    async def delete(self, schedule_id: str, tenant: str | None, identity: str | None) -> None:
        """Delete the schedule (the tasks it started stay as they are)."""
        handle = await self._handle(schedule_id, tenant, identity)
        async with self._reaching(schedule_id):
            await handle.delete()

    async def _handle(self, schedule_id: str, tenant: str | None, identity: str | None) -> ScheduleHandle:
        """The schedule's handle, acting as ``identity``, once it is known to be a schedule of
        Noeta tasks (of ``tenant``)."""
        await self.describe(schedule_id, tenant)
        return self.connection.acting_as(identity).get_schedule_handle(schedule_id)

    @asynccontextmanager
    async def _reaching(self, schedule_id: str) -> AsyncIterator[None]:
        """Turns the cluster's "not found" into ScheduleNotFoundError."""
        try:
            yield
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise _not_found(schedule_id) from err
            raise


__all__ = ["MAX_SCHEDULE_ID_CHARS", "ScheduleOperations", "check_schedule_id"]
