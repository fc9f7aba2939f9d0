"""Human approvals: actions a guard sent to a human, their answers and their timeouts."""

from __future__ import annotations

import json

from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.names import APPROVAL_TIMER_PREFIX
from noeta.protocols.task import ApprovalInput, approval_timed_out, finish_denied_feedback, not_approved


class Approvals:
    """Requests waiting for an answer, and the workflow timers that refuse them when none comes."""

    def __init__(self, log: EnvelopeLog, transcript: Transcript) -> None:
        """Records into ``log``; causes come from ``transcript``."""
        self._log = log
        self._transcript = transcript
        self._waiting: dict[str, int] = {}  # call id -> seq of its ApprovalRequested
        self._timers: dict[str, tuple[str, float]] = {}  # timer id -> (call id, timeout in seconds)

    def requested(self, call_id: str, guard: str, reason: str | None, event: HistoryEvent, cause: int) -> None:
        """A guard's deciding verdict was ``ask``: the action waits for a human."""
        seq = self._log.emit(ev.ApprovalRequested(call_id=call_id, guard=guard, reason=reason), "engine", event, cause)
        self._waiting[call_id] = seq

    def timer_started(self, event: HistoryEvent) -> None:
        """A timer started; an approval's timer is named by its summary."""
        summary = event.user_metadata.summary if event.HasField("user_metadata") else None
        text = json.loads(summary.data) if summary is not None and summary.data else ""
        if isinstance(text, str) and text.startswith(APPROVAL_TIMER_PREFIX):
            attrs = event.timer_started_event_attributes
            timeout = attrs.start_to_fire_timeout.ToTimedelta().total_seconds()
            self._timers[attrs.timer_id] = (text[len(APPROVAL_TIMER_PREFIX):], timeout)

    def timer_fired(self, event: HistoryEvent) -> None:
        """A timer fired: an approval still waiting is refused, as the workflow refuses it."""
        timer = self._timers.pop(event.timer_fired_event_attributes.timer_id, None)
        if timer is not None and timer[0] in self._waiting:
            self.decided(approval_timed_out(*timer), event)

    def decided(self, decision: ApprovalInput, event: HistoryEvent) -> None:
        """An answer (a human's, or the timeout's); a refused finish tells the model why."""
        cause = self._waiting.pop(decision.call_id, None)
        payload: ev.ApprovalGranted | ev.ApprovalDenied
        if decision.approved:
            payload = ev.ApprovalGranted(decision.call_id, decision.approver, decision.reason)
        else:
            payload = ev.ApprovalDenied(decision.call_id, decision.approver, decision.reason)
        seq = self._log.emit(payload, "engine" if decision.approver == "timeout" else "human", event, cause)
        if not decision.approved and decision.call_id.startswith("finish:"):
            self._transcript.feedback(finish_denied_feedback(not_approved(decision)), event, seq)
