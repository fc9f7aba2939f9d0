"""Health endpoints of a worker process, for Kubernetes probes and compose health checks.

``GET /healthz`` answers 200 while the process's event loop is responsive (liveness: a worker whose
loop is stuck stops heartbeating its activities anyway, so restarting it is right).
``GET /readyz`` answers 200 while the worker polls its task queue, 503 before it started and once
it is stopping. Plain HTTP/1.0 on a port of its own, no dependencies.
"""

from __future__ import annotations

import asyncio


class HealthServer:
    """Serves ``/healthz`` and ``/readyz`` (see the module); ``ready`` is set by the worker while it
    polls."""
    def __init__(self, port: int, host: str = "0.0.0.0") -> None:
        """Listens on ``host:port`` once started; not ready until told."""
        self.host, self.port = host, port
        self.ready = False
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Start listening."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)

    async def stop(self) -> None:
        """Stop listening (idempotent)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def _status(self, path: str) -> tuple[int, str]:
        if path == "/healthz":
            return 200, "ok"
        if path == "/readyz":
            return (200, "ready") if self.ready else (503, "not polling")
        return 404, "not found"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5)
            parts = request.decode("latin-1").split()
            code, body = self._status(parts[1] if len(parts) >= 2 else "")
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[code]
            writer.write(
                f"HTTP/1.0 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
            )
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
