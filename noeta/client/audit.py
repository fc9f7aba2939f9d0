"""The audit of a task: who started it, answered its approvals (approved, edited, denied), sent it
goals, injected context, closed, cancelled or terminated it, when, and as which identity, read
from the task's history (Temporal records the caller identity of every request:
:mod:`noeta.protocols.identity`). ``noeta audit TASK`` and ``GET /tasks/{id}/audit`` show it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.payloads import decode_first
from noeta.protocols.identity import Via, parse_identity
from noeta.protocols.interaction import ApprovalInput, GoalInput, InjectInput
from noeta.protocols.names import SIGNAL_CLOSE, SIGNAL_INJECT, UPDATE_APPROVE, UPDATE_REFUSE, UPDATE_SEND_GOAL

Action = Literal["started", "approved", "edited", "denied", "goal_sent", "injected", "closed", "cancelled", "terminated"]
#: Characters of a goal or an injected text an entry quotes.
DETAIL_CHARS = 200


@dataclass(frozen=True)
class AuditEntry:
    """One thing someone did to a task (``GET /tasks/{id}/audit`` answers these): when, what, who
    and how they were identified (``via``: ``key`` an API key's name, ``user`` the CLI's user,
    ``temporal`` a Temporal caller identity)."""

    at: datetime | None
    action: Action
    who: str
    """The API key's name, the CLI's user, or the Temporal caller identity (``via`` says which)."""
    via: Via
    call_id: str | None = None
    """The action answered, for approvals."""
    detail: str | None = None
    """The reason of an approval or denial, the edited arguments (JSON), the goal or the injected
    text (its first DETAIL_CHARS characters)."""


def audit_of(events: Iterable[HistoryEvent]) -> list[AuditEntry]:
    """The audit entries of a task's history (every run, in order)."""
    entries: list[AuditEntry] = []
    for event in events:
        entry = _entry(event)
        if entry is not None:
            entries.append(entry)
    return entries


def _entry(event: HistoryEvent) -> AuditEntry | None:
    t, E = event.event_type, EventType
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        started = event.workflow_execution_started_event_attributes
        if started.continued_execution_run_id:  # a later run of the same task: nobody started it
            return None
        return _made(event, "started", started.identity)
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        if request.input.name in (UPDATE_APPROVE, UPDATE_REFUSE):
            answer: ApprovalInput = decode_first(request.input.args, ApprovalInput)
            if not answer.approved or request.input.name == UPDATE_REFUSE:
                return _made(event, "denied", request.meta.identity, answer.call_id, answer.reason)
            if answer.arguments is not None:
                edited = json.dumps(answer.arguments, ensure_ascii=False, sort_keys=True)
                return _made(event, "edited", request.meta.identity, answer.call_id, edited)
            return _made(event, "approved", request.meta.identity, answer.call_id, answer.reason)
        if request.input.name == UPDATE_SEND_GOAL:
            goal: GoalInput = decode_first(request.input.args, GoalInput)
            return _made(event, "goal_sent", request.meta.identity, detail=goal.goal[:DETAIL_CHARS])
        return None
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        signal = event.workflow_execution_signaled_event_attributes
        if signal.signal_name == SIGNAL_INJECT:
            injected: InjectInput = decode_first(signal.input, InjectInput)
            return _made(event, "injected", signal.identity, detail=f"[{injected.origin}] {injected.text[:DETAIL_CHARS]}")
        if signal.signal_name == SIGNAL_CLOSE:
            return _made(event, "closed", signal.identity)
        return None
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
        cancel = event.workflow_execution_cancel_requested_event_attributes
        return _made(event, "cancelled", cancel.identity, detail=cancel.cause or None)
    if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
        terminated = event.workflow_execution_terminated_event_attributes
        return _made(event, "terminated", terminated.identity, detail=terminated.reason or None)
    return None


def _made(
    event: HistoryEvent, action: Action, identity: str, call_id: str | None = None, detail: str | None = None
) -> AuditEntry:
    who, via = parse_identity(identity)
    at = event.event_time.ToDatetime(tzinfo=timezone.utc) if event.HasField("event_time") else None
    return AuditEntry(at=at, action=action, who=who, via=via, call_id=call_id, detail=detail)
