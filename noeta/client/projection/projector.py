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
from noeta.client.projection.payloads import child_close_attrs, decode_first, failure_text, innermost_message
from noeta.protocols import event_log as ev
from noeta.protocols.appends import (
    SUBTASK_DID_NOT_COMPLETE,
    subtask_failed_block,
    subtask_result_block,
)
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.names import APPROVAL_TIMER_PREFIX
from noeta.protocols.task import (
    CONFIGURATION_ERRORS,
    TaskResult,
    approval_timed_out,
    subtask_output,
)


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
            a3 = event.child_workflow_execution_completed_event_attributes
            result: TaskResult = decode_first(a3.result, TaskResult)
            completed = result.status == "completed"
            call_id = self.children[a3.initiated_event_id][0] if a3.initiated_event_id in self.children else ""
            self.on_child_closed(
                event, a3.initiated_event_id, subtask_output(result) if completed else result.answer, completed,
                subtask_result_block(call_id, result), usage=result.usage, data=result.data,
            )
        elif t in (
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        ):
            attrs = child_close_attrs(event)
            initiated = attrs.initiated_event_id
            call_id = self.children[initiated][0] if initiated in self.children else ""
            block: ToolResultBlock | None
            if t == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
                answer, error_type = failure_text(attrs.failure)
                # A child's configuration error ends the parent too: no tool result reaches its model.
                fatal = error_type in CONFIGURATION_ERRORS
                block = None if fatal else subtask_failed_block(call_id, innermost_message(attrs.failure))
            elif t == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED:
                answer, block = SUBTASK_DID_NOT_COMPLETE, None  # the parent is cancelled with it
            else:
                answer = SUBTASK_DID_NOT_COMPLETE
                block = subtask_failed_block(call_id, SUBTASK_DID_NOT_COMPLETE)
            self.on_child_closed(event, initiated, answer, False, block)
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

