"""A real OTLP/HTTP trace receiver for tests: decodes each ``ExportTraceServiceRequest`` (protobuf)
posted to ``/v1/traces`` and keeps its spans; and the process's OpenTelemetry SDK exporting to it
for the length of a test."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanProcessor

from tests.support.http_handler import LocalHTTPServer, QuietHandler, running


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver decoded it (ids in lower-case hex, parent "" for a root)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    service: str
    attributes: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class OTLPReceiver:
    """``with OTLPReceiver.running() as receiver:`` — spans land in ``receiver.spans``."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.path != "/v1/traces" or self.headers["content-type"] != "application/x-protobuf":
                    self.send_json(404, {})
                    return
                receiver._keep(ExportTraceServiceRequest.FromString(body))
                self.send_json(200, ExportTraceServiceResponse().SerializeToString(), {"content-type": "application/x-protobuf"})

        self.httpd = LocalHTTPServer(Handler)
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        # A span exported again under its ids (a task's invoke_agent span: at its
                        # run's start and end) replaces the earlier write, as trace backends do.
                        self.spans[:] = [
                            s for s in self.spans
                            if (s.trace_id, s.span_id) != (span.trace_id.hex(), span.span_id.hex())
                        ]
                        self.spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                service=str(resource.get("service.name", "")),
                                attributes={a.key: _value(a.value) for a in span.attributes},
                            )
                        )

    def in_trace(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans received so far that belong to ``trace_id``."""
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[OTLPReceiver]:
        """A receiver on a free local port, with this process's spans exported to it meanwhile."""
        receiver = cls()
        with running(receiver), exporting_to(receiver.endpoint):
            yield receiver


class _Switchable(SpanProcessor):
    """Passes spans on while ``on``: OpenTelemetry cannot remove a processor from a provider."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner, self.on = inner, True

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)


@contextlib.contextmanager
def exporting_to(endpoint: str) -> Iterator[None]:
    """The process's SDK tracer provider (installed if there is none: one per process) exports
    every span over OTLP/HTTP to ``endpoint`` as it ends, for the block."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    processor = _Switchable(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    provider.add_span_processor(processor)
    try:
        yield
    finally:
        processor.on = False
