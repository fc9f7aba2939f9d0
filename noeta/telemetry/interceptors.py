"""The Temporal interceptors observability needs, for the client connect (workers built on that
client inherit them): the trace context of tasks (:mod:`.trace_headers`, :mod:`.agent_span`) and
the workflow-side metrics."""

from __future__ import annotations

from typing import Any

from noeta.telemetry import tracing
from noeta.telemetry.agent_span import AgentSpanInterceptor
from noeta.telemetry.metrics import WorkflowMetricsInterceptor
from noeta.telemetry.trace_headers import TraceActivityInterceptor, TraceClientInterceptor


def interceptors() -> list[Any]:
    """Trace propagation (the client's part always; the workflow's part when tracing is on as the
    client connects, as temporalio's own tracing is decided) and the workflow metrics interceptor.
    Installs the tracer provider the ``OTEL_*`` variables name, if any."""
    traced = tracing.configure_tracing()
    return [TraceClientInterceptor(), AgentSpanInterceptor(traced), TraceActivityInterceptor(), WorkflowMetricsInterceptor()]
