"""Content-store retention: delete the bodies of tasks closed longer ago than a retention period.

Temporal says which tasks are closed and when (a task Temporal no longer knows, because its own
namespace retention removed it, counts as closed at the last time it stored a body). Running tasks
and tasks closed within the period keep everything they own, and a body shared with such a task
stays. A released task's step records (noeta.context.step_records) go too, first: a record must
never outlive the body it points at. ``noeta retention --days N`` runs it; schedule it daily
(cron, a Kubernetes CronJob).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from noeta.context.content_store import ContentStore, RetainingStore
from noeta.context.step_records import ReleasingStepRecords, stored_step_records
from noeta.errors import ConfigurationError

#: Tasks asked about at once, and released per store call.
_BATCH = 100


@dataclass(frozen=True)
class RetentionReport:
    """What a retention run released (or, on a dry run, would release) and kept."""
    released: list[str] = field(default_factory=list)
    """Tasks whose bodies were released (or would be, on a dry run)."""
    kept: int = 0
    """Tasks still running or closed within the retention period."""
    bodies_deleted: int = 0
    bytes_deleted: int = 0
    step_records_deleted: int = 0


async def closed_since(temporal: TemporalClient, task_id: str, last_stored: datetime) -> datetime | None:
    """When the task closed, or None while it runs (or continues as new)."""
    try:
        description = await temporal.get_workflow_handle(task_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return last_stored  # removed by Temporal's retention, or never started
        raise
    if description.status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
        return None
    return description.close_time or last_stored


async def apply_retention(
    temporal: TemporalClient,
    store: ContentStore,
    older_than: timedelta,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    step_records: ReleasingStepRecords | None = None,
) -> RetentionReport:
    """Release every task closed more than ``older_than`` ago; delete its step records and its
    unshared bodies. ``step_records``: the workers' own (``Registry.step_records``), when they
    keep them elsewhere than beside ``store``."""
    if not isinstance(store, RetainingStore):
        raise ConfigurationError(f"{store!r} does not record which task stored what; it has no retention")
    if older_than < timedelta(0):
        raise ConfigurationError("the retention period must not be negative")
    cutoff = (now or datetime.now(timezone.utc)) - older_than
    tasks = await asyncio.to_thread(store.tasks)
    released: list[str] = []
    ids = sorted(tasks)
    for start in range(0, len(ids), _BATCH):
        batch = ids[start : start + _BATCH]
        closed = await asyncio.gather(*(closed_since(temporal, t, tasks[t]) for t in batch))
        released += [t for t, at in zip(batch, closed, strict=True) if at is not None and at <= cutoff]
    bodies = size = records = 0
    if not dry_run:
        if step_records is None:
            step_records = await asyncio.to_thread(stored_step_records, store)
        for start in range(0, len(released), _BATCH):
            batch = released[start : start + _BATCH]
            # Records first: should this run stop in between, the task still owns its bodies, so
            # the next run releases it again.
            if step_records is not None:
                records += await asyncio.to_thread(step_records.release, batch, cutoff)
            result = await asyncio.to_thread(store.release, batch, cutoff)
            bodies, size = bodies + result.bodies, size + result.bytes
    return RetentionReport(
        released=released, kept=len(tasks) - len(released), bodies_deleted=bodies, bytes_deleted=size,
        step_records_deleted=records,
    )
