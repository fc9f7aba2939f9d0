"""What a history holds of a task's own data: the bytes of every payload in it (inputs, results,
memos, markers), which identity fields (task queues, worker names, timestamps) do not change."""

from __future__ import annotations

from collections import Counter
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory


def payload_bytes(message: Any) -> int:
    """The bytes (data and metadata) of every Payload inside a protobuf ``message``."""
    if isinstance(message, Payload):
        return len(message.data) + sum(len(k) + len(v) for k, v in message.metadata.items())
    total = 0
    for field, value in message.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif getattr(field, "is_repeated", False) or getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED:
            items = list(value)
        else:
            items = [value]
        total += sum(payload_bytes(item) for item in items if not isinstance(item, (str, bytes, int, float)))
    return total


#: Workflow task events: how many there are depends on timing (results arriving together or apart).
WORKFLOW_TASK_EVENTS = frozenset({
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
})


def history_shape(history: WorkflowHistory) -> tuple[int, Counter[int], int]:
    """(events, each event type's count, payload bytes) of a history, workflow task events left
    out: what a change to the workflow's commands or payloads moves, and ids, queues and timing
    do not."""
    events = [e for e in history.events if e.event_type not in WORKFLOW_TASK_EVENTS]
    return len(events), Counter(e.event_type for e in events), sum(payload_bytes(e) - _timing(e) for e in events)


def _timing(event: Any) -> int:
    """The bytes of a local activity marker's own bookkeeping (its times, in nanoseconds whose
    digits vary from run to run)."""
    if not event.HasField("marker_recorded_event_attributes"):
        return 0
    details = event.marker_recorded_event_attributes.details
    return payload_bytes(details["data"]) if "data" in details else 0
