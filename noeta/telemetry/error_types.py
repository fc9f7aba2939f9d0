"""``error.type`` of a failed model call: the provider's own error type, not the wrapper the
activity raises.

Model calls fail out of the activity as Temporal ``ApplicationError``s (the workflow reads their
type and details), raised *from* what the provider did. The OpenTelemetry GenAI conventions want
"the error code returned by the Generative AI provider or the client library, the canonical name of
exception that occurred, or another low-cardinality error identifier": so the cause is read, most
specific first.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from noeta.errors import ProviderError


def provider_error_type(exc: BaseException) -> str:
    """The provider's error type for a failed call: the type its error body named
    (``ProviderError.error_type``: ``rate_limit_error``, ``insufficient_quota``...), else its HTTP
    status (``429``), else the class of what was raised (``ConnectionError``, a provider's own
    exception); an ApplicationError with nothing underneath (a timeout of ours) gives its type."""
    cause = exc.__cause__ if isinstance(exc, ApplicationError) and exc.__cause__ is not None else exc
    if isinstance(cause, ProviderError):
        return cause.error_type or (str(cause.status) if cause.status is not None else type(cause).__name__)
    if isinstance(cause, ApplicationError):
        return cause.type or type(cause).__name__
    status = getattr(getattr(cause, "response", None), "status_code", None)  # an HTTP client's status error
    return str(status) if isinstance(status, int) else type(cause).__name__


__all__ = ["provider_error_type"]
