"""Human approvals: actions a guard sent to a human, their answers and their timeouts."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.elicitation import elicitation_id
from noeta.protocols.login_wait import login_wait_id
from noeta.protocols.identity import Via, parse_identity
from noeta.protocols.names import APPROVAL_TIMER_PREFIX
from noeta.protocols.task import (
    TIMEOUT_APPROVER,
    ApprovalInput,
    approval_timed_out,
    finish_denied_feedback,
    not_approved,
)


class Approvals:
    """Requests waiting for an answer, and the workflow timers that refuse them when none comes."""

    def __init__(self, log: EnvelopeLog, transcript: Transcript) -> None:
        """Records into ``log``; causes come from ``transcript``."""
        self._log = log
        self._transcript = transcript
        self._waiting: dict[str, tuple[int, datetime | None]] = {}  # call id -> (seq, time) of its ApprovalRequested
        self._timers: dict[str, tuple[str, float]] = {}  # timer id -> (call id, timeout in seconds)
        self._edited: set[str] = set()  # calls approved with edited arguments
        self._asked: dict[str, int] = {}  # tool call id -> questions its MCP server asked so far
        self._listed: set[str] = set()  # questions listed so far (their ElicitationRequested)
        self._logins: dict[str, int] = {}  # tool call id -> new logins it waited for so far

    def requested(self, call_id: str, guard: str, reason: str | None, event: HistoryEvent, cause: int) -> None:
        """A guard's deciding verdict was ``ask``: the action waits for a human. (The guards'
        second look at an edited call does not wait again: the workflow runs it.)"""
        if call_id in self._edited:
            return
        seq = self._log.emit(ev.ApprovalRequested(call_id=call_id, guard=guard, reason=reason), "engine", event, cause)
        self._waiting[call_id] = (seq, _time(event))

    def elicited(self, tool_call_id: str, tool_name: str, request: Any, event: HistoryEvent, cause: int) -> None:
        """A tool call stopped because its MCP server asked a person: the question waits for an
        answer like an approval (noeta.workflows.elicitations numbers them per call, from 1)."""
        asked = request if isinstance(request, dict) else {}
        # Numbered by the worker since questions could be held (listed while the call ran, then
        # perhaps stopped at): a question already listed is not listed again.
        index = asked.get("index")
        index = index if isinstance(index, int) else self._asked.get(tool_call_id, 0) + 1
        self._asked[tool_call_id] = max(index, self._asked.get(tool_call_id, 0))
        call_id = elicitation_id(tool_call_id, index)
        if call_id in self._listed:
            return
        self._listed.add(call_id)
        schema = asked.get("requested_schema")
        payload = ev.ElicitationRequested(
            call_id, tool_call_id, tool_name, str(asked.get("server") or ""), str(asked.get("message") or ""),
            schema if isinstance(schema, dict) else {},
        )
        seq = self._log.emit(payload, f"tool:{tool_name}", event, cause)
        self._waiting[call_id] = (seq, _time(event))

    def login_needed(self, tool_call_id: str, request: Any, event: HistoryEvent, cause: int) -> None:
        """A tool call stopped because a user's login lacks a scope: it waits for the operator's
        new login like an approval (noeta.workflows.login_wait numbers them per call, from 1)."""
        needed = request if isinstance(request, dict) else {}
        self._logins[tool_call_id] = self._logins.get(tool_call_id, 0) + 1
        call_id = login_wait_id(tool_call_id, self._logins[tool_call_id])
        server = str(needed.get("server") or "")
        reason = f"needs a new login with scope '{needed.get('scope') or ''}': run `{needed.get('command') or ''}`"
        seq = self._log.emit(ev.ApprovalRequested(call_id=call_id, guard=f"mcp:{server}", reason=reason), "engine", event, cause)
        self._waiting[call_id] = (seq, _time(event))

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

    def decided(self, decision: ApprovalInput, event: HistoryEvent, identity: str | None = None) -> None:
        """An answer (a human's, or the timeout's); a refused finish tells the model why. The
        approver is the update's caller ``identity`` (:mod:`noeta.protocols.identity`), never the
        text the answer carries (a timeout, which has no update, is the engine's)."""
        cause, asked_at = self._waiting.pop(decision.call_id, (None, None))
        answered_at = _time(event)
        waited = (answered_at - asked_at).total_seconds() if asked_at and answered_at else None
        timed_out = identity is None  # no update: the workflow's timer refused it
        approver: str | None
        via: Via | None
        if timed_out:
            approver, via = TIMEOUT_APPROVER, None
        elif identity:
            approver, via = parse_identity(identity)
        else:  # a caller that sent no identity: nobody to name (the text it carried is not trusted)
            approver, via = None, "temporal"
        payload: ev.ApprovalGranted | ev.ApprovalDenied
        if decision.approved:
            proposed = None
            if decision.arguments is not None:
                self._edited.add(decision.call_id)
                call = self._transcript.call(decision.call_id)
                proposed = call.arguments if call is not None else None
            payload = ev.ApprovalGranted(
                decision.call_id, approver, decision.reason, via, waited, decision.arguments, proposed
            )
        else:
            payload = ev.ApprovalDenied(decision.call_id, approver, decision.reason, via, waited)
        seq = self._log.emit(payload, "engine" if timed_out else "human", event, cause)
        if not decision.approved and decision.call_id.startswith("finish:"):
            self._transcript.feedback(finish_denied_feedback(not_approved(decision)), event, seq)


def _time(event: HistoryEvent) -> datetime | None:
    return event.event_time.ToDatetime(tzinfo=timezone.utc) if event.HasField("event_time") else None
