"""A request's W3C ``traceparent`` header makes the tasks it starts part of the caller's trace
(noeta.telemetry.trace_headers): no OpenTelemetry setup is needed in ``noeta serve`` for that."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from noeta.telemetry.trace_headers import caller_traceparent


class TraceContext:
    """ASGI middleware: runs each HTTP request inside its ``traceparent`` (a malformed one is
    ignored, as the W3C spec asks)."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on inside its caller's trace context."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        value = next((v for k, v in scope["headers"] if k == b"traceparent"), None)
        with caller_traceparent(value.decode("latin-1") if value is not None else None):
            await self.app(scope, receive, send)
