"""Turning Noeta errors into Temporal ApplicationErrors that keep their type and details."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from noeta.activities._attempts import as_details
from noeta.errors import NoetaError, ProviderError
from noeta.protocols.task import AttemptFailure
from noeta.security.scrub import scrub


def to_application_error(err: NoetaError, failures: list[AttemptFailure] | None = None) -> ApplicationError:
    """``failures``: this and the earlier attempts' failures, kept in the details for the workflow."""
    non_retryable = err.non_retryable
    delay = None
    if isinstance(err, ProviderError):
        non_retryable = not err.retryable
        if err.retry_after is not None and err.retryable:
            delay = timedelta(seconds=err.retry_after)
    details = {k: scrub(v) if isinstance(v, str) else v for k, v in err.to_details().items()}
    if failures:
        details["attempt_failures"] = as_details(failures)
    return ApplicationError(
        scrub(str(err)),
        details,
        type=type(err).__name__,
        non_retryable=non_retryable,
        next_retry_delay=delay,
    )
