"""The schedule endpoints: ``/schedules`` (create, list) and ``/schedules/{schedule_id}``
(describe, pause, unpause, trigger, backfill, delete), each one call of the client's schedule API
(:mod:`noeta.client.schedule_methods`). A schedule belongs to the tenant of the key that created
it, and so does every task it starts; for another tenant's key it does not exist (404 on direct
access, absent from the list), exactly as a task. Reading needs the ``read`` role, everything else
``start``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from noeta.client.schedule_info import ScheduleInfo
from noeta.http.bodies import BoundedRoute
from noeta.http.models import TaskOptions
from noeta.http.openapi import AUTHENTICATED, answers
from noeta.http.routes import AppState, KeyId, Limit, State, _non_empty
from noeta.http.schedule_models import (
    BackfillSchedule,
    CreateSchedule,
    ScheduleNote,
    ScheduleOut,
    ScheduleRef,
    ScheduleRunOut,
    TriggerSchedule,
)
from noeta.http.tenancy import Reader, Starter, identity

schedules = APIRouter(dependencies=AUTHENTICATED, route_class=BoundedRoute, tags=["schedules"])

SCHEDULE_PATH = "/schedules/{schedule_id}"
ScheduleId = Annotated[str, Path(description="the schedule's id")]


def schedule_out(state: AppState, info: ScheduleInfo) -> ScheduleOut:
    """The schedule as an answer, each recent run with its task's Temporal UI page."""
    runs = [ScheduleRunOut.model_validate(r).model_copy(update={"ui_url": state.client.task_url(r.task_id)})
            for r in info.recent_runs]
    return ScheduleOut.model_validate(info).model_copy(update={"recent_runs": runs})


@schedules.post("/schedules", status_code=201, summary="Create a schedule: a goal started as a task on a clock",
                responses=answers(401, 409, 413, 422, 429))
async def create_schedule(body: CreateSchedule, state: State, key: KeyId, who: Starter) -> ScheduleRef:
    """Create the schedule; each run is a task of the key's tenant, started with the body's goal
    and options. Everything is checked before it exists (422); a taken id is 409
    ScheduleAlreadyExistsError. A key that has spent its quota gets 429; its runs' spend counts
    towards the key's quota like its other tasks'."""
    await state.quotas.admit(state.client, key)
    options = (body.options or TaskOptions()).to_options()
    schedule_id = await state.client.create_schedule(
        body.schedule_id, body.goal, options, cron=body.cron, every=body.every, timezone=body.timezone,
        overlap=body.overlap, catchup_window=body.catchup_window, jitter=body.jitter, paused=body.paused,
        note=body.note, task_queue=_non_empty(body.task_queue, "task_queue"), api_key_id=key, tenant=who.tenant,
        identity=identity(who),
    )
    return ScheduleRef(schedule_id=schedule_id)


@schedules.get("/schedules", summary="List schedules: timing, paused, next and recent runs", responses=answers(401, 422))
async def list_schedules(state: State, who: Reader, limit: Limit = 100) -> list[ScheduleOut]:
    """The key's tenant's schedules, by id (the listing lags a moment behind a change)."""
    return [schedule_out(state, s) for s in await state.client.list_schedules(limit, tenant=who.tenant)]


@schedules.get(SCHEDULE_PATH, summary="A schedule: timing, policies, next runs, recent runs and their tasks",
               responses=answers(401, 404))
async def get_schedule(schedule_id: ScheduleId, state: State, who: Reader) -> ScheduleOut:
    """The schedule as it is now."""
    return schedule_out(state, await state.client.describe_schedule(schedule_id, tenant=who.tenant))


@schedules.post(f"{SCHEDULE_PATH}/pause", summary="Pause a schedule: no run starts until it is unpaused",
                responses=answers(401, 404, 422))
async def pause_schedule(schedule_id: ScheduleId, state: State, who: Starter, body: ScheduleNote | None = None) -> ScheduleRef:
    """Pause it (runs that run go on); ``note`` says why."""
    note = body.note if body is not None else None
    await state.client.pause_schedule(schedule_id, note, tenant=who.tenant, identity=identity(who))
    return ScheduleRef(schedule_id=schedule_id)


@schedules.post(f"{SCHEDULE_PATH}/unpause", summary="Unpause a schedule", responses=answers(401, 404, 422))
async def unpause_schedule(
    schedule_id: ScheduleId, state: State, who: Starter, body: ScheduleNote | None = None
) -> ScheduleRef:
    """Let it run again from its next due time."""
    note = body.note if body is not None else None
    await state.client.unpause_schedule(schedule_id, note, tenant=who.tenant, identity=identity(who))
    return ScheduleRef(schedule_id=schedule_id)


@schedules.post(f"{SCHEDULE_PATH}/trigger", status_code=202, summary="Start a run of a schedule now",
                responses=answers(401, 404, 422, 429))
async def trigger_schedule(
    schedule_id: ScheduleId, state: State, key: KeyId, who: Starter, body: TriggerSchedule | None = None
) -> ScheduleRef:
    """Start a run now (it shows in the schedule's recent runs within a moment)."""
    await state.quotas.admit(state.client, key)
    overlap = body.overlap if body is not None else None
    await state.client.trigger_schedule(schedule_id, overlap=overlap, tenant=who.tenant, identity=identity(who))
    return ScheduleRef(schedule_id=schedule_id)


@schedules.post(f"{SCHEDULE_PATH}/backfill", status_code=202, summary="Start the runs that were due in a past period",
                responses=answers(401, 404, 422, 429))
async def backfill_schedule(
    schedule_id: ScheduleId, body: BackfillSchedule, state: State, key: KeyId, who: Starter
) -> ScheduleRef:
    """Start the runs due between ``start`` and ``end``, as the overlap policy allows."""
    await state.quotas.admit(state.client, key)
    await state.client.backfill_schedule(
        schedule_id, body.start, body.end, overlap=body.overlap, tenant=who.tenant, identity=identity(who)
    )
    return ScheduleRef(schedule_id=schedule_id)


@schedules.delete(SCHEDULE_PATH, summary="Delete a schedule (the tasks it started stay)", responses=answers(401, 404))
async def delete_schedule(schedule_id: ScheduleId, state: State, who: Starter) -> ScheduleRef:
    """Delete it; its tasks stay, listed with their schedule_id."""
    await state.client.delete_schedule(schedule_id, tenant=who.tenant, identity=identity(who))
    return ScheduleRef(schedule_id=schedule_id)
