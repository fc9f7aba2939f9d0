"""OpenTelemetry tracing: one trace per task, an ``invoke_agent`` span per task run
(:mod:`.agent_span`) with Noeta's model-call and tool-call spans as its children (GenAI semantic
conventions, see :mod:`.instrument`), the trace context travelling in Temporal headers
(:mod:`.trace_headers`).

Off unless configured, and then at no cost. It is on when either

- the standard variables name an exporter: ``OTEL_TRACES_EXPORTER`` (``otlp`` or ``console``) or
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (OTLP over HTTP;
  ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, headers... as the OpenTelemetry SDK reads
  them) — :func:`configure_tracing` then installs a tracer provider; or
- the program installed an OpenTelemetry SDK tracer provider itself
  (``opentelemetry.trace.set_tracer_provider``).

``OTEL_SDK_DISABLED=true`` turns it off. Needs ``pip install 'noeta[otel]'``.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from typing import Any

from noeta.telemetry.settings import OtelSettings

logger = logging.getLogger(__name__)

TRACER_NAME = "noeta"
_lock = threading.Lock()
_configured = False


def _sdk_provider_installed() -> bool:
    # A program that installed an SDK provider has imported the SDK: without it loaded, nothing is
    # imported here (the OpenTelemetry SDK costs a worker ~5 MB it does not need when tracing is off).
    sdk = sys.modules.get("opentelemetry.sdk.trace")
    if sdk is None:
        return False
    from opentelemetry import trace

    return isinstance(trace.get_tracer_provider(), sdk.TracerProvider)


def active_tracer() -> Any | None:
    """Noeta's tracer while an SDK tracer provider is installed, else None: spans are then not
    made at all, not even non-recording ones. Checked per call, so a provider installed later counts."""
    if not _sdk_provider_installed():
        return None
    from opentelemetry import trace

    return trace.get_tracer(TRACER_NAME)


def tracing_enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether spans are made: an OTEL_* exporter variable is set or an SDK tracer provider is
    installed, unless OTEL_SDK_DISABLED is true."""
    return _enabled(OtelSettings.from_env(env))


def _enabled(settings: OtelSettings) -> bool:
    if settings.otel_sdk_disabled:
        return False
    return settings.traces_exporter_named or _sdk_provider_installed()


def configure_tracing(env: Mapping[str, str] | None = None) -> bool:
    """Install an SDK tracer provider with the exporter the ``OTEL_*`` variables name (once per
    process; a provider the program installed itself is left alone). True if tracing is on."""
    global _configured
    settings = OtelSettings.from_env(env)
    if not _enabled(settings):
        return False
    with _lock:
        if _configured or _sdk_provider_installed():
            return True
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        except ImportError:
            logger.warning("OTEL_* tracing variables are set but the [otel] extra is not installed: tracing is off")
            return False
        exporter: Any
        if settings.otel_traces_exporter == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        resource = Resource.create({"service.name": settings.otel_service_name})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _configured = True
        return True
