"""How the API reads a request body before FastAPI validates it against the endpoint's model: at
most :data:`MAX_BODY_BYTES` (counted as it arrives, whatever ``Content-Length`` said), and strict
JSON (``NaN`` and ``Infinity``, which Python's parser accepts, are refused). Endpoints get this
through their router's ``route_class``."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from noeta.http.errors import HTTPError
from noeta.security.http_guard import DEFAULT_MAX_BODY

#: Largest request body accepted (Temporal refuses payloads over 2 MiB anyway).
MAX_BODY_BYTES = DEFAULT_MAX_BODY


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class BoundedRequest(Request):
    """A request whose body is read with a size limit and parsed as strict JSON; errors are
    ``HTTPError`` (413 ``PayloadTooLargeError``, 400 ``JSONDecodeError``...), which FastAPI lets
    through to the exception handlers."""

    async def body(self) -> bytes:
        """The request body, read once; HTTPError 413 past MAX_BODY_BYTES."""
        if not hasattr(self, "_body"):
            received = bytearray()
            async for chunk in self.stream():
                received += chunk
                if len(received) > MAX_BODY_BYTES:
                    raise HTTPError(413, "PayloadTooLargeError", f"request body is over {MAX_BODY_BYTES} bytes")
            self._body = bytes(received)
        return self._body

    async def json(self) -> Any:
        """The body parsed as JSON, once; HTTPError 400 for malformed JSON (NaN and Infinity
        included)."""
        if not hasattr(self, "_json"):
            try:
                self._json = json.loads(await self.body(), parse_constant=_reject_constant)
            except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
                raise HTTPError(400, type(err).__name__, f"malformed JSON body: {err}") from err
        return self._json


class BoundedRoute(APIRoute):
    """An endpoint that reads its body as a :class:`BoundedRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The route's handler, given the request as a BoundedRequest."""
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            return await handler(BoundedRequest(request.scope, request.receive))

        return bounded
