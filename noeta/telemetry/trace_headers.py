"""How a task's trace context travels: in the ``noeta-trace`` Temporal header (a W3C
``traceparent``), written by Noeta's client when the caller has a trace (``noeta serve``'s
incoming ``traceparent`` header, or the program's current OpenTelemetry span) and by the workflow
for its activities, sub-agents and continue-as-new (:mod:`.agent_span`); read by the activities,
whose model and tool spans become children of the task run's ``invoke_agent`` span.

No client setup is needed: the client interceptor is always installed and costs nothing when
there is no trace to pass on.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import temporalio.client
import temporalio.worker
from temporalio.api.common.v1 import Payload

from noeta.config.context_values import set_within
from noeta.protocols.names import HEADER_TEMPORAL_TRACER, HEADER_TRACE
from noeta.protocols.trace_context import SpanRef, parse_traceparent, span_from_bytes
from noeta.telemetry.logs import caller_trace
from noeta.telemetry.tracing import active_tracer

_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("noeta_caller_traceparent", default=None)


@contextlib.contextmanager
def caller_traceparent(value: str | None) -> Iterator[None]:
    """Tasks started inside the block belong to the trace ``value`` (a ``traceparent``) names;
    a missing or malformed value changes nothing. ``noeta serve`` wraps each request in it."""
    ref = parse_traceparent(value)
    if ref is None:
        yield
        return
    with set_within(_caller, value), caller_trace(ref.trace_id):
        yield


def current_traceparent() -> str | None:
    """The caller's trace context: set by :func:`caller_traceparent`, else the current
    OpenTelemetry span of a program that uses OpenTelemetry (never imported here otherwise)."""
    value = _caller.get()
    if value is not None:
        return value
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return SpanRef(f"{context.trace_id:032x}", f"{context.span_id:016x}", int(context.trace_flags)).traceparent


def header(ref: SpanRef) -> Payload:
    """The ``noeta-trace`` header's payload naming ``ref``: its 25 bytes, as plain binary (headers
    do not go through the payload codec, and trace ids are no secret)."""
    return Payload(metadata={"encoding": b"binary/plain"}, data=ref.to_bytes())


def with_header(headers: Mapping[str, Payload], ref: SpanRef | None) -> Mapping[str, Payload]:
    """``headers`` plus ``noeta-trace`` naming ``ref`` (unchanged when ``ref`` is None)."""
    return headers if ref is None else {**headers, HEADER_TRACE: header(ref)}


def _decoded(payload: Payload | None) -> Any:
    if payload is None:
        return None
    if payload.metadata.get("encoding") == b"binary/plain":
        return span_from_bytes(payload.data)
    if payload.metadata.get("encoding") != b"json/plain":
        return None
    try:
        return json.loads(payload.data)
    except ValueError:
        return None


def span_of(headers: Mapping[str, Payload]) -> SpanRef | None:
    """The span the headers name: Noeta's ``noeta-trace``, else the ``traceparent`` in
    temporalio's TracingInterceptor header; None when neither names a valid one."""
    ours = _decoded(headers.get(HEADER_TRACE))  # written by header(); a JSON traceparent is read too
    ref = ours if isinstance(ours, SpanRef) else parse_traceparent(ours)
    if ref is not None:
        return ref
    carrier = _decoded(headers.get(HEADER_TEMPORAL_TRACER))
    return parse_traceparent(carrier.get("traceparent")) if isinstance(carrier, dict) else None


# -- the client: a task started inside a trace belongs to it --------------------------------------


class TraceClientInterceptor(temporalio.client.Interceptor):
    """Puts the caller's trace context (:func:`current_traceparent`) on the tasks it starts."""

    def intercept_client(self, next: temporalio.client.OutboundInterceptor) -> temporalio.client.OutboundInterceptor:
        """Wrap the client's outbound calls."""
        return _ClientOutbound(next)


class _ClientOutbound(temporalio.client.OutboundInterceptor):
    async def start_workflow(self, input: temporalio.client.StartWorkflowInput) -> Any:
        input.headers = _with_caller(input.headers)
        return await super().start_workflow(input)

    async def start_update_with_start_workflow(self, input: temporalio.client.StartWorkflowUpdateWithStartInput) -> Any:
        start = input.start_workflow_input
        start.headers = _with_caller(start.headers)
        return await super().start_update_with_start_workflow(input)


def _with_caller(headers: Mapping[str, Payload]) -> Mapping[str, Payload]:
    if HEADER_TRACE in headers:
        return headers
    return with_header(headers, parse_traceparent(current_traceparent()))


# -- activities: their spans are children of the span the workflow named --------------------------


class TraceActivityInterceptor(temporalio.client.Interceptor, temporalio.worker.Interceptor):
    """Makes the span named in an activity's ``noeta-trace`` header the current span while the
    activity runs (only when tracing is on), so the model and tool spans it makes are its children.
    A client interceptor too (passing client calls through) so that workers built on the client
    inherit it."""

    def intercept_activity(self, next: temporalio.worker.ActivityInboundInterceptor) -> temporalio.worker.ActivityInboundInterceptor:
        """Wrap the activity's execution."""
        return _ActivityInbound(next)


class _ActivityInbound(temporalio.worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        ref = span_of(input.headers)
        if ref is None or active_tracer() is None:
            return await super().execute_activity(input)
        from opentelemetry import context, trace

        parent = trace.NonRecordingSpan(
            trace.SpanContext(int(ref.trace_id, 16), int(ref.span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(ref.flags))
        )
        token = context.attach(trace.set_span_in_context(parent))
        try:
            return await super().execute_activity(input)
        finally:
            context.detach(token)


__all__ = [
    "TraceActivityInterceptor",
    "TraceClientInterceptor",
    "caller_traceparent",
    "current_traceparent",
    "header",
    "span_of",
    "with_header",
]
