"""Turning Noeta errors into Temporal ApplicationErrors that keep their type and details."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from noeta.errors import NoetaError, ProviderError


def to_application_error(err: NoetaError) -> ApplicationError:
    non_retryable = err.non_retryable
    delay = None
    if isinstance(err, ProviderError):
        non_retryable = not err.retryable
        if err.retry_after is not None and err.retryable:
            delay = timedelta(seconds=err.retry_after)
    return ApplicationError(
        str(err),
        err.to_details(),
        type=type(err).__name__,
        non_retryable=non_retryable,
        next_retry_delay=delay,
    )
