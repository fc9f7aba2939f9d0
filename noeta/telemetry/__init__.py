"""Observability: logging (:mod:`.logs`), OpenTelemetry tracing (:mod:`.tracing`), metrics
(:mod:`.metrics`), and the per-call instrumentation activities use (:mod:`.instrument`).
See docs/observability.md."""
