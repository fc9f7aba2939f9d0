"""Which provider failures are worth retrying.

Retryable: HTTP 408, 409, 429 and 5xx, connection errors and timeouts. Not retryable: 400, 401,
403, 404, 422 and any other 4xx, and a context-length error (its own type). Programming errors of
a provider object (TypeError, IndexError from an exhausted test script...) are not retried either:
another attempt cannot fix them.
"""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import Mapping
from typing import Any

from noeta.errors import ContextLengthError, ProviderError
from noeta.security.scrub import scrub, scrub_exception

RETRYABLE_STATUS = frozenset({408, 409, 429})
_CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",
    "context length",
    "prompt is too long",
    "maximum context",
    "too many tokens",
    "context size",  # llama.cpp: "exceeds the available context size"
)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def is_retryable_status(status: int) -> bool:
    """Whether another attempt may succeed after this HTTP status (a timeout, conflict, rate limit
    or server fault)."""
    return status in RETRYABLE_STATUS or status >= 500


def error_from_response(
    provider: str, status: int, headers: Mapping[str, str], message: str, error_type: str | None = None
) -> ProviderError:
    """The typed error for an HTTP error response of a provider (secrets scrubbed from the body;
    ``error_type``: the type its body named)."""
    message = scrub(message)
    if status in (400, 413) and any(m in message.lower() for m in _CONTEXT_LENGTH_MARKERS):
        return ContextLengthError(provider=provider, message=message, status=status, error_type=error_type)
    return ProviderError(
        provider=provider,
        message=message,
        status=status,
        retryable=is_retryable_status(status),
        retry_after=retry_after_seconds(headers),
        error_type=error_type,
    )


def classify_exception(provider: str, exc: BaseException) -> ProviderError:
    """Any exception raised while calling ``provider`` as a :class:`ProviderError`. The exception
    and its chain are scrubbed of secrets in place: they end up in history as the failure's cause."""
    scrub_exception(exc)
    if isinstance(exc, ProviderError):
        return exc
    # httpx is looked up, not imported: a worker whose providers never loaded it cannot see its
    # errors, and need not carry it (~4 MB).
    httpx: Any = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.HTTPStatusError):
        return error_from_response(
            provider, exc.response.status_code, exc.response.headers, exc.response.text[:2000]
        )
    transport = (httpx.TransportError,) if httpx is not None else ()
    if isinstance(exc, (*transport, TimeoutError, ConnectionError)):
        return ProviderError(
            provider=provider, message=f"{type(exc).__name__}: {exc}", retryable=True
        )
    return ProviderError(provider=provider, message=f"{type(exc).__name__}: {exc}", retryable=False)
