"""The envelopes of one task, numbered as they are projected."""

from __future__ import annotations

from datetime import timezone
from typing import Any

from temporalio.api.history.v1 import HistoryEvent

from noeta.protocols import event_log as ev


class EnvelopeLog:
    """Every envelope projected so far: ``seq`` is its position, gap-free from 1 and continuing
    across the runs of the task."""

    def __init__(self, task_id: str) -> None:
        """The envelopes of task ``task_id``, in seq order."""
        self.task_id = task_id
        self.trace_id = ""
        self.envelopes: list[ev.EventEnvelope] = []

    @property
    def last_seq(self) -> int:
        """The seq of the latest envelope (0 before the first)."""
        return len(self.envelopes)

    def adopt_trace(self, trace_id: str | None) -> None:
        """The task's trace id, from its first run's input (the task id when it has none)."""
        if not self.trace_id:
            self.trace_id = trace_id or self.task_id

    def emit(
        self,
        payload: Any,
        actor: str,
        event: HistoryEvent,
        causation: int | None,
        origin: str | None = None,
    ) -> int:
        """Append the envelope of ``payload``, projected from ``event``; returns its seq."""
        seq = len(self.envelopes) + 1
        self.envelopes.append(
            ev.EventEnvelope(
                seq=seq,
                type=type(payload).__name__,
                actor=actor,
                origin=origin,  # type: ignore[arg-type]
                trace_id=self.trace_id,
                causation_id=causation,
                payload=payload,
                task_id=self.task_id,
                # Timezone-aware (UTC), so JSON/SSE consumers never guess.
                timestamp=event.event_time.ToDatetime(tzinfo=timezone.utc) if event.HasField("event_time") else None,
                history_event_id=event.event_id,
            )
        )
        return seq
