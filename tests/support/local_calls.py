"""How a task's history ran one kind of activity: as activities, or as local-activity markers."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType

from noeta.client.client import AsyncClient


async def scheduled_and_markers(client: AsyncClient, task_id: str, activity_type: str) -> tuple[int, int]:
    """(``activity_type`` activities scheduled, its local-activity markers) in the task's history."""
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    scheduled = markers = 0
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled += event.activity_task_scheduled_event_attributes.activity_type.name == activity_type
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            data = event.marker_recorded_event_attributes.details.get("data")
            markers += data is not None and activity_type.encode() in data.payloads[0].data
    return scheduled, markers
