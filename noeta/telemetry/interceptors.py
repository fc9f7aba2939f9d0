"""The Temporal interceptors observability needs, for the client connect (workers built on that
client inherit them): tracing when configured, and the workflow-side metrics."""

from __future__ import annotations

from typing import Any

from noeta.telemetry import tracing
from noeta.telemetry.metrics import WorkflowMetricsInterceptor


def interceptors() -> list[Any]:
    """The tracing interceptors (when tracing is enabled) and the workflow metrics interceptor."""
    return [*tracing.interceptors(), WorkflowMetricsInterceptor()]
