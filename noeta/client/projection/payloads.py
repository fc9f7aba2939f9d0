"""Reading Noeta's payloads and Temporal failures out of history events."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

from noeta.protocols.attempts import AttemptFailure
from noeta.protocols.names import SA_SCHEDULED_BY
from noeta.protocols.step_failures import failure_reason
from noeta.security.codec import refuse_sealed

_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def decode(payload: Payload, cls: type) -> Any:
    """A Noeta payload (JSON, or null) as ``cls``; EncryptionKeyError naming the key for one still
    encrypted (a reader without the keys)."""
    if payload.metadata.get("encoding") == b"binary/null":
        return None
    refuse_sealed(payload)
    adapter = _ADAPTERS.get(cls) or _ADAPTERS.setdefault(cls, TypeAdapter(cls))
    return adapter.validate_python(json.loads(payload.data))


def decode_first(payloads: Payloads, cls: type) -> Any:
    """The first of ``payloads`` as ``cls`` (None when there is none)."""
    return decode(payloads.payloads[0], cls) if payloads.payloads else None


def _application_failure(failure: Failure) -> Failure:
    """The outermost ApplicationError of a failure chain (an activity failure wraps one), else the
    innermost failure."""
    while not failure.HasField("application_failure_info") and failure.HasField("cause"):
        failure = failure.cause
    return failure


def failure_details(failure: Failure) -> dict[str, Any]:
    """The first detail of that ApplicationError (Noeta puts a dict there), or {}."""
    node = _application_failure(failure)
    payloads = node.application_failure_info.details.payloads if node.HasField("application_failure_info") else []
    value = json.loads(payloads[0].data) if payloads else None
    return value if isinstance(value, dict) else {}


def earlier_attempts(failure: Failure) -> list[AttemptFailure]:
    """The attempts of a call that failed for good before its last one (the worker's attempt
    ledger lists them all in the failure's details, the last one included)."""
    return [AttemptFailure(**f) for f in failure_details(failure).get("attempt_failures", [])][:-1]


class RetryFields(TypedDict):
    """What a call's Retried event (ProviderCallRetried, ToolCallRetried) says of the attempt that
    failed."""
    attempt: int
    error: str
    error_type: str | None


def retry_fields(failed: AttemptFailure) -> RetryFields:
    """A failed attempt as its call's Retried event tells it."""
    return RetryFields(attempt=failed.attempt, error=failed.error, error_type=failed.error_type)


def innermost_message(failure: Failure) -> str:
    """The deepest cause's reason (what AgentWorkflow's ``failure_message`` reports)."""
    while failure.HasField("cause"):
        failure = failure.cause
    return failure_reason(failure.message, own_error_type(failure))


def own_error_type(failure: Failure) -> str | None:
    """The ApplicationError type of this failure itself (not of a cause), as the workflow sees the
    ``cause`` of an ActivityError or ChildWorkflowError; None for a timeout, a cancellation..."""
    if not failure.HasField("application_failure_info"):
        return None
    return failure.application_failure_info.type or None


def failure_text(failure: Failure) -> tuple[str, str | None]:
    """(message, ApplicationError type) of that ApplicationError."""
    node = _application_failure(failure)
    error_type = node.application_failure_info.type if node.HasField("application_failure_info") else None
    return failure_reason(node.message), error_type or None


def child_close_attrs(event: HistoryEvent) -> Any:
    """The attributes of a child workflow's unsuccessful close event, whichever kind it is."""
    for name in (
        "child_workflow_execution_failed_event_attributes",
        "child_workflow_execution_canceled_event_attributes",
        "child_workflow_execution_terminated_event_attributes",
        "child_workflow_execution_timed_out_event_attributes",
    ):
        if event.HasField(name):
            return getattr(event, name)
    raise ValueError("not a child close event")




def scheduled_by(event: HistoryEvent) -> str | None:
    """The schedule that started the run whose started event this is (Temporal's
    TemporalScheduledById, set by the server on every run a schedule starts), else None."""
    fields = event.workflow_execution_started_event_attributes.search_attributes.indexed_fields
    if SA_SCHEDULED_BY not in fields:
        return None
    found = decode(fields[SA_SCHEDULED_BY], str)
    return found if isinstance(found, str) else None
