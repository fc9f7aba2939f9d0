"""A schedule as seen from outside: when it runs next, whether it is paused, and the tasks it
started (``Client.describe_schedule``, ``Client.list_schedules``), read from Temporal's description
of the schedule and the memo Noeta gave it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import (
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleListActionStartWorkflow,
    ScheduleListDescription,
)

from noeta.client.schedule_spec import Timing, overlap_name
from noeta.client.visibility import tenant_of
from noeta.protocols.names import DEFAULT_TENANT, SCHEDULE_MEMO_KEY, WORKFLOW_NAMES

#: How many of the next run times a description lists.
NEXT_RUNS = 5


@dataclass(frozen=True)
class ScheduleRun:
    """One run a schedule started: an ordinary task."""

    task_id: str
    """The task's id (the schedule's id and the run's scheduled time, e.g. ``triage-2026-12-07T08:00:00Z``)."""
    scheduled_at: datetime
    """When it was due (before jitter)."""
    started_at: datetime
    """When Temporal started it."""


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule of Noeta tasks as it is now. ``list_schedules`` fills what the cluster's listing
    holds (the policies and queue only in ``describe_schedule``)."""

    schedule_id: str
    goal: str | None
    """The goal each run starts with."""
    timing: str
    """How it runs, as people read it: ``cron 0 8 * * MON-FRI (Europe/Berlin)`` or ``every 10s``."""
    cron: str | None = None
    every_seconds: float | None = None
    timezone: str | None = None
    paused: bool = False
    note: str | None = None
    """Why it was paused (or what the last change said)."""
    next_runs: list[datetime] = field(default_factory=list)
    """The next times it is due (at most NEXT_RUNS; none while paused: Temporal would still list
    the times the schedule would run, but none of them starts a run)."""
    recent_runs: list[ScheduleRun] = field(default_factory=list)
    """The tasks it started last, oldest first (Temporal keeps the last ten)."""
    running: list[str] = field(default_factory=list)
    """The ids of its runs that still run (``describe_schedule`` only)."""
    tenant: str = DEFAULT_TENANT
    """The tenant it belongs to; its runs are that tenant's tasks."""
    overlap: str | None = None
    """Its overlap policy (``describe_schedule`` only)."""
    catchup_window_seconds: float | None = None
    """How long after an outage missed runs are still started (``describe_schedule`` only)."""
    jitter_seconds: float | None = None
    task_queue: str | None = None
    """The queue its runs start on (``describe_schedule`` only)."""
    runs_total: int | None = None
    """How many runs it has started (``describe_schedule`` only)."""
    skipped_overlap: int | None = None
    """Runs skipped because the last still ran (``describe_schedule`` only)."""
    missed_catchup: int | None = None
    """Runs missed for good: due during an outage longer than the catch-up window."""
    created: datetime | None = None


def _runs(actions: Any) -> list[ScheduleRun]:
    return [
        ScheduleRun(a.action.workflow_id, a.scheduled_at, a.started_at)
        for a in actions
        if isinstance(a, ScheduleActionResult) and isinstance(a.action, ScheduleActionExecutionStartWorkflow)
    ]


def _timing(memo: dict[str, Any]) -> dict[str, Any]:
    every = memo.get("every_seconds")
    timing = Timing(memo.get("cron"), timedelta(seconds=every) if every else None, memo.get("timezone"))
    return {"goal": memo.get("goal"), "timing": timing.describe(), "cron": timing.cron, "every_seconds": every,
            "timezone": timing.timezone}


async def _memo(item: ScheduleDescription | ScheduleListDescription) -> dict[str, Any]:
    try:
        found = await item.memo_value(SCHEDULE_MEMO_KEY)
    except KeyError:
        return {}
    return found if isinstance(found, dict) else {}


async def described(desc: ScheduleDescription) -> ScheduleInfo:
    """The ScheduleInfo of a schedule's full description."""
    schedule, info = desc.schedule, desc.info
    action = schedule.action
    policy, jitter = schedule.policy, schedule.spec.jitter
    return ScheduleInfo(
        schedule_id=desc.id,
        **_timing(await _memo(desc)),
        paused=schedule.state.paused,
        note=schedule.state.note or None,
        next_runs=[] if schedule.state.paused else list(info.next_action_times[:NEXT_RUNS]),
        recent_runs=_runs(info.recent_actions),
        running=[a.workflow_id for a in info.running_actions if isinstance(a, ScheduleActionExecutionStartWorkflow)],
        tenant=tenant_of(desc.typed_search_attributes),
        overlap=overlap_name(policy.overlap),
        catchup_window_seconds=policy.catchup_window.total_seconds() if policy.catchup_window else None,
        jitter_seconds=jitter.total_seconds() if jitter is not None else None,
        task_queue=action.task_queue if isinstance(action, ScheduleActionStartWorkflow) else None,
        runs_total=info.num_actions,
        skipped_overlap=info.num_actions_skipped_overlap,
        missed_catchup=info.num_actions_missed_catchup_window,
        created=info.created_at,
    )


async def listed(item: ScheduleListDescription) -> ScheduleInfo:
    """The ScheduleInfo of a schedule's entry in the cluster's listing."""
    state = item.schedule.state if item.schedule is not None else None
    paused = state.paused if state is not None else False
    return ScheduleInfo(
        schedule_id=item.id,
        **_timing(await _memo(item)),
        paused=paused,
        note=(state.note or None) if state is not None else None,
        next_runs=list(item.info.next_action_times[:NEXT_RUNS]) if item.info is not None and not paused else [],
        recent_runs=_runs(item.info.recent_actions) if item.info is not None else [],
        tenant=tenant_of(item.typed_search_attributes),
    )


def runs_tasks(item: ScheduleDescription | ScheduleListDescription) -> bool:
    """Whether the schedule starts Noeta tasks (a cluster may hold other schedules too)."""
    if isinstance(item, ScheduleDescription):
        action = item.schedule.action
        return isinstance(action, ScheduleActionStartWorkflow) and action.workflow in WORKFLOW_NAMES
    listed_action = item.schedule.action if item.schedule is not None else None
    return isinstance(listed_action, ScheduleListActionStartWorkflow) and listed_action.workflow in WORKFLOW_NAMES


__all__ = ["NEXT_RUNS", "ScheduleInfo", "ScheduleRun", "described", "listed", "runs_tasks"]
