"""One place where a model call or a tool call is observed: a span (GenAI semantic conventions),
metrics, and the log context (task id, call id, attempt). Activities wrap each call in
:func:`model_call` / :func:`tool_call`; each is cheap when tracing and metrics are off.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from temporalio import activity
from temporalio.exceptions import CancelledError

from noeta.protocols.messages import LLMRequest, LLMResponse, Message
from noeta.protocols.tool import ToolResult
from noeta.security.scrub import scrub
from noeta.telemetry import metrics
from noeta.telemetry.content import capture_message_content, content_json
from noeta.telemetry.error_types import provider_error_type
from noeta.telemetry.logs import log_context
from noeta.telemetry.tracing import active_tracer


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_status(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _span(name: str, kind: str, attributes: dict[str, Any]) -> Iterator[Any]:
    tracer = active_tracer()
    if tracer is None:
        yield _NoSpan()
        return
    from opentelemetry.trace import SpanKind

    span_kind = SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL
    # Exceptions are recorded below, scrubbed: the raw ones may quote a provider's error body.
    with tracer.start_as_current_span(
        name, kind=span_kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        yield span


def _failed(span: Any, exc: BaseException, error_type: str | None = None) -> str:
    """Mark ``span`` failed (``error_type``: its ``error.type``, by default the exception's class);
    returns the metrics outcome."""
    if isinstance(exc, (asyncio.CancelledError, CancelledError)):
        span.set_attribute("error.type", "cancelled")
        return "cancelled"
    span.set_attribute("error.type", error_type or type(exc).__name__)
    if not isinstance(span, _NoSpan):
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, scrub(str(exc))[:500]))
    return "error"


class ModelCall:
    """Handed to the body of :func:`model_call`; call :meth:`finished` with the response."""

    def __init__(self, span: Any, model: str, provider: str = "") -> None:
        """``span``: the attempt's span; ``model`` and ``provider``: the labels of its metrics."""
        self.span, self.model, self.provider = span, model, provider

    def finished(self, response: LLMResponse, model: str | None = None) -> None:
        """Record the response's model (``model``: the one the provider reported, else the one
        asked for), stop reason and token usage on the span, and the tokens in the metrics."""
        usage = response.usage
        self.span.set_attribute("gen_ai.response.model", model or self.model)
        raw_id = response.raw.get("id") if isinstance(response.raw, dict) else None
        if isinstance(raw_id, str) and raw_id:
            self.span.set_attribute("gen_ai.response.id", raw_id)
        self.span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
        self.span.set_attribute("gen_ai.usage.input_tokens", usage.input)
        self.span.set_attribute("gen_ai.usage.output_tokens", usage.output)
        if usage.cache_read:
            self.span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read)
        if usage.cache_write:
            self.span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write)
        if capture_message_content() and not isinstance(self.span, _NoSpan):
            self.span.set_attribute("gen_ai.output.messages", content_json([Message(role="assistant", content=list(response.content))]))
        meter = activity.metric_meter()
        for kind, value in (
            ("input", usage.input),
            ("output", usage.output),
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
        ):
            labels = {"provider": self.provider, "model": self.model, "kind": kind}
            metrics.add(meter, metrics.MODEL_TOKENS, value, labels, "tokens by provider, model and kind")


@contextlib.contextmanager
def model_call(
    provider: str, request: LLMRequest, task_id: str, call_id: str, registered_as: str | None = None,
    endpoint: str | None = None,
) -> Iterator[ModelCall]:
    """Observe one model-call attempt: span ``chat {model}``, calls/tokens/duration metrics.
    ``provider``: who serves it ("openai", "anthropic"... see ``provider_system``);
    ``registered_as``: its name in the worker's registry, when it differs; ``endpoint``: the URL it
    is called at (``server.address`` and ``server.port``). A failure's ``error.type`` is the
    provider's own (:mod:`.error_types`)."""
    attempt = activity.info().attempt
    model = request.model or "default"
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": task_id,
        "noeta.call_id": call_id,
        "noeta.attempt": attempt,
    }
    if registered_as is not None and registered_as != provider:
        attributes["noeta.provider"] = registered_as
    attributes.update(server_attributes(endpoint))
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    meter = activity.metric_meter()
    if attempt > 1:
        metrics.add(meter, metrics.RETRIES, 1, {"kind": "model"}, "attempts after the first")
    outcome = "ok"
    started = time.monotonic()
    with log_context(task_id=task_id, call_id=call_id, attempt=attempt), _span(f"chat {model}", "client", attributes) as span:
        try:
            observed = ModelCall(span, model, provider)
            if capture_message_content() and not isinstance(span, _NoSpan):
                span.set_attribute("gen_ai.input.messages", content_json(request.messages, request.system))
            yield observed
        except BaseException as exc:
            outcome = _failed(span, exc, provider_error_type(exc))
            raise
        finally:
            labels = {"provider": provider, "model": model}
            metrics.add(meter, metrics.MODEL_CALLS, 1, {**labels, "outcome": outcome}, "model-call attempts")
            metrics.observe_seconds(meter, metrics.MODEL_DURATION, time.monotonic() - started, labels, "seconds per model-call attempt")


def server_attributes(endpoint: str | None) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of a provider's base URL (none for an in-process one)."""
    if not endpoint:
        return {}
    url = urlsplit(endpoint)
    if not url.hostname:
        return {}
    port = url.port or {"https": 443, "http": 80}.get(url.scheme)
    return {"server.address": url.hostname, **({"server.port": port} if port else {})}


class ToolCall:
    """Handed to the body of :func:`tool_call`; call :meth:`finished` with the result."""

    def __init__(self, span: Any) -> None:
        """``span``: the call's span; the outcome is ``ok`` until a failed result says otherwise."""
        self.span = span
        self.outcome = "ok"

    def finished(self, result: ToolResult) -> None:
        """Record the tool's own verdict: a failed result marks the span and the outcome."""
        self.outcome = "ok" if result.success else "failed"
        if not result.success:
            self.span.set_attribute("error.type", "tool_error")


@contextlib.contextmanager
def tool_call(tool_name: str, task_id: str, call_id: str) -> Iterator[ToolCall]:
    """Observe one tool-call attempt: span ``execute_tool {name}``, calls/duration metrics."""
    attempt = activity.info().attempt
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": task_id,
        "noeta.attempt": attempt,
    }
    meter = activity.metric_meter()
    if attempt > 1:
        metrics.add(meter, metrics.RETRIES, 1, {"kind": "tool"}, "attempts after the first")
    started = time.monotonic()
    with log_context(task_id=task_id, call_id=call_id, attempt=attempt), _span(f"execute_tool {tool_name}", "internal", attributes) as span:
        call = ToolCall(span)
        try:
            yield call
        except BaseException as exc:
            call.outcome = _failed(span, exc)
            raise
        finally:
            metrics.add(meter, metrics.TOOL_CALLS, 1, {"tool": tool_name, "outcome": call.outcome}, "tool-call attempts")
            metrics.observe_seconds(meter, metrics.TOOL_DURATION, time.monotonic() - started, {"tool": tool_name}, "seconds per tool-call attempt")


def model_cost(provider: str, model: str, usd: float) -> None:
    """Add a priced model call's cost to ``noeta_cost_usd_total`` (called once per call that
    returned, never for an answer read back from the step record)."""
    if usd > 0:
        info = activity.info()
        metrics.add_cost(activity.metric_meter(), (info.workflow_namespace or "", info.task_queue), provider, model, usd)


def approvals_requested(count: int) -> None:
    """Actions a guard sent to a human (called by the guard activity)."""
    metrics.add(activity.metric_meter(), metrics.APPROVALS_REQUESTED, count, {}, "actions sent for approval")


def start_resource_span(resource: str, op: str) -> Any:
    """A span for one call of an instrumented resource (``instrument(...)``), ended by
    :func:`end_resource_span`; None while tracing is off."""
    tracer = active_tracer()
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind

    return tracer.start_span(
        f"{resource}.{op}", kind=SpanKind.CLIENT, attributes={"noeta.resource": resource, "noeta.resource.op": op}
    )


def end_resource_span(span: Any, call: Any) -> None:
    """End it with the call's outcome and derived fields (``call`` is a ResourceCall)."""
    if span is None:
        return
    for key, value in call.fields.items():
        if isinstance(value, (str, bool, int, float)):
            span.set_attribute(f"noeta.resource.{key}", value)
    if call.outcome == "error":
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", call.error_type or "error")
        span.set_status(Status(StatusCode.ERROR))
    span.end()
