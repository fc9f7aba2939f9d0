"""A local tool's call in history: one local-activity marker (PATCH_LOCAL_TOOLS) stands for the
activity's scheduled, started and completed (or failed) events (a retry that waits longer than
temporalio's local retry threshold adds a marker of the failed attempt with its ``backoff``, which
the projection passes over: noeta.client.projection.steps). The marker does not hold the
call's input: its activity id names the call (noeta.workflows.local_tools.local_activity_id), and
the model's proposal of that call gives the tool and its arguments."""

from __future__ import annotations

import json
from typing import Any, Protocol

from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent, MarkerRecordedEventAttributes

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.payloads import decode_first
from noeta.client.projection.rounds import ToolRounds
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.activity_io import InvokeToolOutput


class ToolOutcomes(Protocol):
    """What records a tool call's outcome (noeta.client.projection.steps.Steps)."""

    @property
    def log(self) -> EnvelopeLog:
        """The event log."""

    def tool_returned(
        self, call_id: str, tool_name: str, out: InvokeToolOutput, event: HistoryEvent, cause: int, *, local: bool = False
    ) -> None:
        """A tool call returned."""

    def tool_failed(
        self, call_id: str, tool_name: str, failure: Failure, attempt: int, event: HistoryEvent, cause: int,
        *, local: bool = False,
    ) -> None:
        """A tool call failed for good."""


def call_id_of(activity_id: str) -> str:
    """The call id in a local tool call's activity id (``{number}/{call id}``)."""
    number, _, call_id = activity_id.partition("/")
    return call_id if number.isdigit() and call_id else activity_id


def local_tool_call(
    steps: ToolOutcomes,
    transcript: Transcript,
    rounds: ToolRounds,
    attrs: MarkerRecordedEventAttributes,
    data: dict[str, Any],
    event: HistoryEvent,
) -> None:
    """A local tool call's marker: ToolCallStarted, then ToolCallCompleted (or ToolCallFailed),
    both with ``local`` set, and its result joins its round as an activity's would."""
    call_id = call_id_of(str(data.get("activity_id", "")))
    proposed = transcript.call(call_id)
    tool_name = proposed.tool_name if proposed is not None else "?"
    rounds.join(call_id, attrs.workflow_task_completed_event_id, local=True)
    started = ev.ToolCallStarted(
        call_id=call_id, tool_name=tool_name, arguments=proposed.arguments if proposed is not None else {}, local=True
    )
    seq = steps.log.emit(started, "engine", event, transcript.proposal(call_id))
    if "result" in attrs.details:
        out: InvokeToolOutput = decode_first(attrs.details["result"], InvokeToolOutput)
        steps.tool_returned(call_id, tool_name, out, event, seq, local=True)
    elif attrs.HasField("failure"):
        attempt = int(data.get("attempt") or 1)
        steps.tool_failed(call_id, tool_name, attrs.failure, attempt, event, seq, local=True)


def marker_data(attrs: MarkerRecordedEventAttributes) -> dict[str, Any]:
    """The local-activity marker's ``data`` detail (activity type and id, attempt...)."""
    value = json.loads(attrs.details["data"].payloads[0].data)
    return value if isinstance(value, dict) else {}


__all__ = ["ToolOutcomes", "call_id_of", "local_tool_call", "marker_data"]
