"""How failures of steps become the task's typed errors (or its cancellation)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    RetryState,
)

from noeta.errors import AttemptsExhaustedError, PolicyError, ScopeError
from noeta.protocols.step_failures import failure_reason


def typed_task_error(cause: ApplicationError) -> ApplicationError:
    """Fail the task with an activity's typed error, keeping its type and details for the client."""
    details = cause.details[0] if cause.details else {"message": cause.message}
    return ApplicationError(cause.message, details, type=cause.type, non_retryable=True)


def raise_if_cancelled(err: ActivityError | ChildWorkflowError) -> None:
    """A step cancelled because the task is being cancelled: cancel the task, do not fail it."""
    if isinstance(err.cause, CancelledError):
        raise asyncio.CancelledError(str(err.cause)) from err


def failure_message(err: BaseException) -> str:
    """The innermost reason of an activity/child failure chain, read from the recorded failure as
    the projection reads it (the SDK puts "Application error" in place of an empty message)."""
    cause: BaseException | None = getattr(err, "cause", None)
    while cause is not None:
        err, cause = cause, getattr(cause, "cause", None)
    recorded = getattr(err, "failure", None)
    message = recorded.message if recorded is not None else getattr(err, "message", None) or str(err)
    return failure_reason(message, getattr(err, "type", None))


def attempts_exhausted(
    attempts: int, issues: list[str], failure_type: str, data: Any = None, raw_text: str | None = None
) -> ApplicationError:
    """The non-retryable AttemptsExhaustedError that fails a goal whose answers kept failing
    validation."""
    exhausted = AttemptsExhaustedError(
        attempts=attempts, issues=issues, last_failure_type=failure_type, last_data=data, last_raw_text=raw_text
    )
    return ApplicationError(str(exhausted), exhausted.to_details(), type=AttemptsExhaustedError.__name__, non_retryable=True)


def provider_failure(err: ActivityError, max_retries: int) -> ApplicationError:
    """A model call that failed for good: its own typed error when it was not retryable, else
    AttemptsExhaustedError with one issue per attempt (the worker's attempt ledger marks the
    failure it gave up on with ``exhausted``: "failures", "rate_limit", "lost" or "store", the last
    failing the task with the store's own ContentStoreError)."""
    cause = err.cause
    details = cause.details[0] if isinstance(cause, ApplicationError) and cause.details else {}
    spent = details.get("exhausted") if isinstance(details, dict) else None
    if isinstance(cause, ApplicationError) and spent in (None, "store") and (
        cause.non_retryable or err.retry_state == RetryState.NON_RETRYABLE_FAILURE
    ):
        return typed_task_error(cause)  # its own error; for the store, ContentStoreError
    failures = details.get("attempt_failures") if isinstance(details, dict) else None
    issues = [f["error"] for f in failures] if failures else [failure_message(err)]
    attempts = len(failures) if spent is not None and failures else max_retries + 1
    return attempts_exhausted(attempts, issues, "rate_limit" if spent == "rate_limit" else "provider")


def policy_error(policy: object, err: Exception) -> ApplicationError:
    """A bug in a policy fails the task instead of failing workflow tasks forever; a scope that
    fails the schema the policy expects fails it with ScopeError."""
    if isinstance(err, ScopeError):
        return ApplicationError(str(err), err.to_details(), type=ScopeError.__name__, non_retryable=True)
    return ApplicationError(
        f"policy {type(policy).__name__}.decide raised {type(err).__name__}: {err}",
        type=PolicyError.__name__,
        non_retryable=True,
    )


def stopped_for(err: ActivityError, error_type: str) -> dict[str, Any] | None:
    """The request a remote MCP server sent when ``err`` is a tool call that stopped for it with
    ``error_type`` (a question for a person, a sampling request); None: it failed otherwise."""
    cause = err.cause
    if not isinstance(cause, ApplicationError) or cause.type != error_type or not cause.details:
        return None
    details = cause.details[0]
    request = details.get("request") if isinstance(details, dict) else None
    return request if isinstance(request, dict) else None
