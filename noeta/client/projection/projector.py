"""Workflow history -> EventEnvelopes. A pure function: the same history gives the same stream.

The history is the only event store. Each AgentWorkflow history event that means something to the
agent becomes one or more envelopes; ``seq`` is assigned in projection order, gap-free from 1 and
continuing across the runs of one task.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.lifecycle import TaskEvents
from noeta.protocols import event_log as ev
from noeta.protocols.names import APPROVAL_TIMER_PREFIX
from noeta.protocols.task import approval_timed_out


class Projector(TaskEvents):
    """Incremental projection: feed history events in order, get the new envelopes back."""

    def feed(self, event: HistoryEvent) -> list[ev.EventEnvelope]:
        before = len(self.envelopes)
        self._feed(event)
        return self.envelopes[before:]

    def _feed(self, event: HistoryEvent) -> None:
        t = event.event_type
        E = EventType
        if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            self.on_started(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            self.on_scheduled(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            self.on_activity_started(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            self.on_completed(event)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            a = event.activity_task_failed_event_attributes
            self.on_activity_failed(event, a.failure, a.scheduled_event_id)
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            a2 = event.activity_task_timed_out_event_attributes
            self.on_activity_failed(event, a2.failure, a2.scheduled_event_id)
        elif t == E.EVENT_TYPE_TIMER_STARTED:
            summary = event.user_metadata.summary if event.HasField("user_metadata") else None
            text = json.loads(summary.data) if summary is not None and summary.data else ""
            if isinstance(text, str) and text.startswith(APPROVAL_TIMER_PREFIX):
                attrs_t = event.timer_started_event_attributes
                timeout = attrs_t.start_to_fire_timeout.ToTimedelta().total_seconds()
                self.approval_timers[attrs_t.timer_id] = (text[len(APPROVAL_TIMER_PREFIX):], timeout)
        elif t == E.EVENT_TYPE_TIMER_FIRED:
            timer = self.approval_timers.pop(event.timer_fired_event_attributes.timer_id, None)
            if timer is not None and timer[0] in self.approval_seq:
                self.on_approval(approval_timed_out(*timer), event)
        elif t == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            self.on_update_accepted(event)
        elif t == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            self.on_memo(event)
        elif t == E.EVENT_TYPE_MARKER_RECORDED:
            self.on_local_activity(event)
        elif t == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            self.on_child_initiated(event)
        elif t == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            self.on_child_completed(event)
        elif t in (
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        ):
            self.on_child_ended(event)
        else:
            self.on_closed(event)


def project(
    history: Iterable[HistoryEvent] | Sequence[Iterable[HistoryEvent]], task_id: str = ""
) -> list[ev.EventEnvelope]:
    """Project the history of a task (one run, or its runs in order) into envelopes."""
    items: list[Any] = list(history)
    # One run's events, or a list of runs: the first item tells which.
    runs: list[Iterable[HistoryEvent]] = [items] if not items or isinstance(items[0], HistoryEvent) else items
    projector = Projector(task_id=task_id)
    for run in runs:
        projector.begin_run()
        for event in run:
            projector.feed(event)
    return projector.envelopes

