"""Billable Temporal actions in one workflow history, by Temporal Cloud's published rules.

What a history shows, and how each counts (docs.temporal.io/cloud/actions, read 2026-12):
- a run's start (client start, signal-with-start, continue-as-new, child start): 1;
- an activity started or retried: 1 per attempt (the started event carries the attempt number;
  earlier attempts of a retried activity leave no event of their own);
- local activities: all those whose markers one workflow task reports: 1 together (a workflow
  task that only extends a long local activity is its heartbeat, and costs 1 more);
- a search-attribute upsert: 1, except one that only sets TemporalChangeVersion (what a patch
  writes; exempt); attributes given at start cost nothing;
- a timer started, a signal received or sent, an update accepted, a child workflow initiated: 1.
Not actions: patch markers, memo changes (workflow properties modified), workflow tasks themselves.
Queries and rejected updates leave no event: a caller counts them itself.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

LOCAL_ACTIVITY_MARKER = "core_local_activity"
CHANGE_VERSION_ATTRIBUTE = "TemporalChangeVersion"

#: Events that cost one action each.
ONE_EACH = (
    "workflow_execution_started_event_attributes",
    "timer_started_event_attributes",
    "workflow_execution_signaled_event_attributes",
    "signal_external_workflow_execution_initiated_event_attributes",
    "workflow_execution_update_accepted_event_attributes",
    "start_child_workflow_execution_initiated_event_attributes",
)


def billable_actions(events: Iterable[Any]) -> dict[str, int]:
    """The actions of one history's ``events`` (temporalio.api.history.v1.HistoryEvent), by kind."""
    counts: collections.Counter[str] = collections.Counter()
    local_batches: set[int] = set()
    for event in events:
        kind = event.WhichOneof("attributes")
        if kind in ONE_EACH:
            counts[kind.removesuffix("_event_attributes")] += 1
        elif kind == "activity_task_started_event_attributes":
            counts["activity_attempts"] += max(1, event.activity_task_started_event_attributes.attempt)
        elif kind == "marker_recorded_event_attributes":
            marker = event.marker_recorded_event_attributes
            if marker.marker_name == LOCAL_ACTIVITY_MARKER:
                local_batches.add(marker.workflow_task_completed_event_id)
        elif kind == "upsert_workflow_search_attributes_event_attributes":
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            if set(fields) - {CHANGE_VERSION_ATTRIBUTE}:
                counts["search_attribute_upserts"] += 1
    if local_batches:
        counts["local_activity_batches"] = len(local_batches)
    return dict(counts)


def total_actions(events: Iterable[Any]) -> int:
    """The number of billable actions in one history's ``events``."""
    return sum(billable_actions(events).values())


__all__ = ["billable_actions", "total_actions"]
